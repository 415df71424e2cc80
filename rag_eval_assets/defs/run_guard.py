"""A crashed `rag-eval` never blocks the next one, and a run waiting for a pool slot says so and can be stopped.

Every run `rag-eval` executes carries its process id, the process's start time and the host in its tags. Before it
executes anything, `rag-eval` marks the runs of this host whose process is gone (SIGKILL, an out-of-memory kill, a
crash) as failed and frees the pool slots they held, and frees the claims (slots, queued steps) still held by runs
that have ended. Where a daemon launches runs, Dagster's run monitoring does the same (deploy/nightly/dagster.yaml).

While a step of our run waits for a slot, a watcher thread prints which run holds the slot and since when, and frees
the claims of ended runs in that pool, as rag-eval did before starting. Dagster
captures SIGINT and SIGTERM during execution but checks for them only between steps, never while the in-process
executor waits for a slot; so the watcher does: it cancels the waiting run, frees its claims and exits.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

import dagster as dg
from dagster._utils.interrupts import check_captured_interrupt

PID_TAG = "rag_eval/pid"
PID_START_TAG = "rag_eval/pid_start"  # tells a live process from another that reused the pid
HOST_TAG = "rag_eval/host"
_UNFINISHED = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
POLL_S = 1.0
EXIT_INTERRUPTED = 130


def own_tags() -> dict[str, str]:
    return {PID_TAG: str(os.getpid()), PID_START_TAG: _start_time(os.getpid()) or "", HOST_TAG: socket.gethostname()}


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _start_time(pid)
    return not started or now is None or now == started


def recover_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Fail this host's runs whose rag-eval process is gone and free the pool slots of every ended run; one line
    per recovered run."""
    host = socket.gethostname()
    said = []
    for run in instance.get_runs(dg.RunsFilter(statuses=_UNFINISHED, tags={HOST_TAG: host})):
        pid = int(run.tags.get(PID_TAG, "0") or 0)
        if pid and not _alive(pid, run.tags.get(PID_START_TAG, "")):
            instance.report_run_failed(run, f"its rag-eval process {pid} on {host} is gone (killed or crashed)")
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            said.append(f"run {run.run_id} ({run.job_name}) of process {pid}, which is gone: marked failed, "
                        "its pool slots freed")
    for pool in instance.event_log_storage.get_concurrency_keys():
        said += _free_ended_claims(instance, pool, instance.event_log_storage.get_concurrency_info(pool))
    return said


def _free_ended_claims(instance: dg.DagsterInstance, pool: str, info) -> list[str]:
    """Free the claims in `pool` of runs that have ended, slots and queued steps alike; one line per run. A step can
    outlive its run in the queue: Dagster's wait loop queues its step again when it finds it gone, so a run cancelled
    while waiting may queue it again before its process exits. A freed slot would then be assigned to that step,
    which nobody will ever claim, and every later run would wait for it."""
    said = []
    queued = {p.run_id for p in info.pending_steps}
    for run_id in sorted(info.active_run_ids | queued):
        run = instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            instance.event_log_storage.free_concurrency_slots_for_run(run_id)
            what = "slot" if run_id in info.active_run_ids else "queued step"
            said.append(f"pool {pool}: freed the {what} of ended run {run_id}")
    return said


@contextmanager
def watching(instance: dg.DagsterInstance, run_id: str, say: Callable[[str], None]) -> Iterator[None]:
    """While the block executes run `run_id`: say which run holds a slot it waits for, and end it on an interrupt
    that arrives while it waits."""
    stop = threading.Event()
    thread = threading.Thread(target=_watch, args=(instance, run_id, say, stop), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _watch(instance: dg.DagsterInstance, run_id: str, say: Callable[[str], None], stop: threading.Event) -> None:
    told: set[tuple[str, str]] = set()
    while not stop.wait(POLL_S):
        for pool in instance.event_log_storage.get_concurrency_keys():
            info = instance.event_log_storage.get_concurrency_info(pool)
            waiting = [p for p in info.pending_steps if p.run_id == run_id and p.assigned_timestamp is None]
            if not waiting:
                continue
            for line in _free_ended_claims(instance, pool, info):
                say(line)
            if check_captured_interrupt():
                _cancel(instance, run_id, pool, say)
            for holder in sorted(info.active_run_ids - {run_id}):
                if (pool, holder) not in told:
                    told.add((pool, holder))
                    say(f"waiting for a slot of pool {pool} (limit {info.limit}): {_holder(instance, holder, info)}; "
                        "Ctrl-C or SIGTERM cancels this run")


def _holder(instance: dg.DagsterInstance, run_id: str, info) -> str:
    steps = [p for p in info.pending_steps if p.run_id == run_id and p.assigned_timestamp is not None]
    record = instance.get_run_record_by_id(run_id)
    since = steps[0].assigned_timestamp if steps else (
        datetime.fromtimestamp(record.start_time, timezone.utc) if record and record.start_time else None)
    job = record.dagster_run.job_name if record else "?"
    pid = record.dagster_run.tags.get(PID_TAG) if record else None
    step = f", step {steps[0].step_key}" if steps else ""
    when = f" since {since.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC" if since else ""
    return f"held by run {run_id} ({job}{step}{f', pid {pid}' if pid else ''}){when}"


def _cancel(instance: dg.DagsterInstance, run_id: str, pool: str, say: Callable[[str], None]) -> None:
    run = instance.get_run_by_id(run_id)
    if run is not None and not run.is_finished:
        instance.report_run_canceled(run, f"interrupted while waiting for a slot of pool {pool}")
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)
    say(f"interrupted while waiting for a slot of pool {pool}: run {run_id} canceled")
    # The main thread sits in Dagster's wait loop, which never looks at the interrupt: end the process here. It may
    # have queued its step again meanwhile; whoever waits in the pool next frees it (_free_ended_claims).
    os._exit(EXIT_INTERRUPTED)
