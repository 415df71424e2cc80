"""The nightly host of docs/deployment.md, for real: deploy/nightly's instance on a throw-away PostgreSQL, its code
server and daemon as separate processes (as the systemd units run them), one night (one run of nightly_job, whose
op runs the pipeline's runs) from the schedule's tick to the report, and the daemon's whole process group killed in
the middle of it.

The schedule's tick is the scheduler daemon's own: the schedule is started with the CLI and its start moved back a
day, so the daemon finds the last 02:00 UTC tick missed and catches up on it, as after a host that was down at 02:00.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import ScheduleInstigatorData

from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, pipeline_stages
from rag_eval_assets.defs.night_story import NIGHT_TAG, NIGHTLY_JOB, pipeline_runs
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.nightly_host import dagster_cli, host_services, night_runs, service
from rag_eval_assets_tests.sample_config import write_sample_config

NIGHT_TIMEOUT = 360.0


def _rewind_schedule(instance: dg.DagsterInstance) -> None:
    """Move the running schedule's start back a day: its last 02:00 UTC tick is then one the scheduler missed."""
    (state,) = [s for s in instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE)
                if s.name == "nightly_benchmark"]
    data = state.instigator_data
    instance.update_instigator_state(state.with_data(
        ScheduleInstigatorData(cron_schedule=data.cron_schedule, start_timestamp=time.time() - 86400)))


def _last_2am_utc() -> str:
    now = datetime.now(timezone.utc)
    tick = now.replace(hour=2, minute=0, second=0, microsecond=0)
    return (tick if tick <= now else tick - timedelta(days=1)).strftime("%Y-%m-%d")


def _wait(what: str, until, instance: dg.DagsterInstance, night: str, timeout: float, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        runs = night_runs(instance, night)
        failed = [(r.job_name, r.tags.get("dagster/partition"), r.status) for r in runs
                  if r.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)]
        assert not failed, failed
        found = until(runs)
        if found:
            return found
        assert time.monotonic() < deadline, f"no {what} after {timeout}s: {[(r.job_name, r.status) for r in runs]}"
        time.sleep(poll)


@contextmanager
def nightly_host(tmp_path: Path, monkeypatch) -> Iterator[tuple[dg.DagsterInstance, subprocess.Popen, list[str],
                                                                dict[str, str], str]]:
    """deploy/nightly's instance on a throw-away cluster and its code server, with the schedule started and the
    last 02:00 tick not yet taken. Yields the instance, the code server, the daemon's command, the
    services' environment and the night the daemon will run."""
    config = write_sample_config(
        tmp_path, "retrievers: [bm25]\nk_values: [3, 5]\nanswering: {k_values: [5]}\n"
    )
    with host_services(tmp_path, monkeypatch, config) as (instance, server, daemon, env):
        dagster_cli(env, "schedule", "start", "nightly_benchmark")
        _rewind_schedule(instance)
        yield instance, server, daemon, env, _last_2am_utc()


def _answer_run_in_flight(runs: list[dg.DagsterRun]) -> dg.DagsterRun | None:
    return next((r for r in runs if r.job_name == ANSWER_GRID_JOB and r.status == dg.DagsterRunStatus.STARTED), None)


def test_a_night_survives_the_daemon_killed_with_its_process_group(tmp_path, monkeypatch):
    with nightly_host(tmp_path, monkeypatch) as (instance, _, daemon, env, night):
        with service(daemon, env, tmp_path / "daemon.log") as first:
            in_flight = _wait("answer run in flight", _answer_run_in_flight, instance, night, NIGHT_TIMEOUT)
            os.killpg(first.pid, signal.SIGKILL)  # what a service manager's stop of the daemon's group does
            first.wait()
        with service(daemon, env, tmp_path / "daemon-restarted.log"):
            _wait("the night's end", lambda runs: any(r.job_name == NIGHTLY_JOB and r.is_finished for r in runs),
                  instance, night, NIGHT_TIMEOUT, poll=2)

        # The night's run went on with the daemon killed under it: it is the code server's child, not the daemon's,
        # and the restarted daemon, catching up on the same tick, did not start the night again (its run key).
        (night_run,) = instance.get_runs(dg.RunsFilter(job_name=NIGHTLY_JOB, tags={NIGHT_TAG: night}))
        assert night_run.status == dg.DagsterRunStatus.SUCCESS
        assert night_run.tags["dagster/run_key"] == f"nightly-{night}"
        assert instance.get_run_by_id(in_flight.run_id).status == dg.DagsterRunStatus.SUCCESS
        runs = pipeline_runs(instance, night_run)
        assert in_flight.run_id in {r.run_id for r in runs}
        expected = {(job, key) for job, _, keys in pipeline_stages(load_settings(env["RAG_EVAL_CONFIG"]))
                    for key in keys}
        per_partition = Counter((r.job_name, r.tags.get("dagster/partition")) for r in runs)
        assert per_partition == Counter(expected)  # every partition of the night ran exactly once
        assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        assert not instance.event_log_storage.get_concurrency_info("llm").claimed_slots

    (run_dir,) = (tmp_path / "store" / "runs").iterdir()
    assert (run_dir / REPORT_FILE).is_file()
    # The night's run prints INFO and above (python_logs in deploy/nightly/dagster.yaml), each pipeline run as it
    # ends among them; DEBUG events stay in the event log.
    code_output = (tmp_path / "code-server.log").read_text(encoding="utf-8", errors="replace")
    assert re.search(rf" - dagster - INFO - nightly_job - \S+ - night - retrieval_grid_job \[bm25\]: succeeded "
                     rf"\(run \S+\)\n", code_output)
    assert " - DEBUG - " not in code_output
