"""A crashed `rag-eval run` never blocks the next one. Three real `rag-eval run` processes share one Dagster
instance whose `llm` pool has one slot: A's judge calls get no reply, so it holds the slot; B waits for it, says which
run holds it, and ends on SIGTERM while the slot is still held; A is killed with SIGKILL while it holds the slot; C
recovers A's run (failed, slot freed) and completes. Every wait follows an event (waiting.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import dagster as dg

from rag_eval_assets.defs.run_guard import HOST_TAG, PID_START_TAG, PID_TAG, own_tags, recover_dead_runs
from rag_eval_assets_tests.llm_fault_server import llm_fault_server, schema_reply
from rag_eval_assets_tests.sample_config import REPO, write_sample_config
from rag_eval_assets_tests.waiting import run_to_end, wait_for

RAG_EVAL = Path(sys.executable).parent / "rag-eval"  # the entry point of the environment running the tests
EXIT_GUARD_S = 120.0  # a process told to end (SIGTERM, SIGKILL) that has not ended by then hangs


def _config(directory: Path, store: Path, base_url: str) -> Path:
    directory.mkdir()
    # A read timeout no held reply reaches: A's judges wait for the test, not for a clock.
    config = write_sample_config(directory, (
        "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
        f"llm: {{base_url: '{base_url}', model: m, read_timeout: 86400.0, "
        "retry: {max_attempts: 2, base_delay: 0.0, max_delay: 0.0}}\n"))
    # One store for all three runs, as on a user's machine.
    config.write_text(config.read_text().replace(str(directory / "store"), str(store)), encoding="utf-8")
    return config


def _start(config: Path, env: dict, log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen([str(RAG_EVAL), "--config", str(config), "run"], env=env, cwd=config.parent,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def test_a_killed_run_never_blocks_the_next(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")  # the llm pool has one slot
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    store = tmp_path / "store"
    started = []
    # A's judge calls get no reply until the test is done with A: it holds the llm slot as long as the test needs.
    release = threading.Event()

    def held(body):
        release.wait()
        return schema_reply(body)

    with llm_fault_server(responder=held) as slow, llm_fault_server(responder=schema_reply) as fast, \
            dg.DagsterInstance.from_config(str(home)) as instance:
        try:
            a = _start(_config(tmp_path / "a", store, slow.base_url), env, tmp_path / "a.log")
            started.append(a)

            def holder():
                return instance.event_log_storage.get_concurrency_info("llm").active_run_ids
            (a_run,) = wait_for(holder, "run A to hold the llm slot", tmp_path, running=[a])

            b = _start(_config(tmp_path / "b", store, fast.base_url), env, tmp_path / "b.log")
            started.append(b)
            said = wait_for(lambda: re.search(r"waiting for a slot of pool llm \(limit 1\): held by run (\S+) "
                                              r"\(answer_grid_job, step judged_answers, pid (\d+)\) since [-\d: ]+ UTC",
                                              (tmp_path / "b.log").read_text()), "run B to say it waits", tmp_path,
                            running=[a, b])
            assert (said.group(1), int(said.group(2))) == (a_run, a.pid)
            # SIGTERM ends B while A still holds the slot (A never lets go of it): B stopped waiting for it.
            os.kill(b.pid, signal.SIGTERM)
            assert b.wait(timeout=EXIT_GUARD_S) == 130
            assert holder() == {a_run}
            assert re.search(r"interrupted while waiting for a slot of pool llm: run \S+ canceled$",
                             (tmp_path / "b.log").read_text().strip())
            (b_run,) = [r for r in instance.get_runs(dg.RunsFilter(job_name="answer_grid_job"))
                        if r.run_id != a_run and r.tags.get("rag_eval/pid") == str(b.pid)]
            assert b_run.status == dg.DagsterRunStatus.CANCELED

            os.killpg(a.pid, signal.SIGKILL)
            a.wait(timeout=EXIT_GUARD_S)
            assert instance.get_run_by_id(a_run).status == dg.DagsterRunStatus.STARTED  # nobody noticed yet
            assert holder() == {a_run}

            c = run_to_end([str(RAG_EVAL), "--config", str(tmp_path / "b" / "rag_eval.yaml"), "run"], cwd=tmp_path,
                           env=env)
        finally:
            release.set()  # the slow server's held requests end, so it can stop
            for process in started:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        # Before anything runs, on stderr with the runs' progress (the story of the run is on stdout).
        lines = c.stderr.splitlines()
        assert lines[0].startswith(f"rag-eval: recovered run {a_run} (answer_grid_job) of process {a.pid}, which is "
                                   "gone: marked failed, its pool slots freed"), c.stderr[:2000]
        assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]
        assert "metrics_job: succeeded" in c.stderr
        assert instance.get_run_by_id(a_run).status == dg.DagsterRunStatus.FAILURE
        assert holder() == set()


def _run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, tags: dict[str, str]) -> dg.DagsterRun:
    run = dg.DagsterRun(job_name="answer_grid_job", run_id=str(uuid.uuid4()), status=status, tags=tags)
    instance.add_run(run)
    return run


def test_a_step_queued_again_by_a_cancelled_run_never_takes_the_slot(tmp_path):
    """The state a cancelled run can leave (its wait loop queues its step again before its process exits): when the
    slot's holder is recovered, Dagster assigns the freed slot to that step; rag-eval frees it too, so the next run
    gets the slot instead of waiting for a step nobody will claim."""
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()  # its pid is gone once waited for
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots("llm", 1)
        dead = _run(instance, dg.DagsterRunStatus.STARTED,
                    {PID_TAG: str(dead_pid.pid), PID_START_TAG: "", HOST_TAG: socket.gethostname()})
        cancelled = _run(instance, dg.DagsterRunStatus.CANCELED, own_tags())
        assert storage.claim_concurrency_slot("llm", dead.run_id, "judged_answers").is_claimed
        assert not storage.claim_concurrency_slot("llm", cancelled.run_id, "judged_answers").is_assigned

        assert recover_dead_runs(instance) == [
            f"run {dead.run_id} (answer_grid_job) of process {dead_pid.pid}, which is gone: marked failed, its pool "
            "slots freed",
            f"pool llm: freed the queued step of ended run {cancelled.run_id}",
        ]
        info = storage.get_concurrency_info("llm")
        assert (info.active_run_ids, info.pending_steps) == (set(), [])
        following = _run(instance, dg.DagsterRunStatus.STARTED, own_tags())
        assert storage.claim_concurrency_slot("llm", following.run_id, "judged_answers").is_claimed
        assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
