"""A crashed `rag-eval run` never blocks the next one. Three real `rag-eval run` processes share one Dagster
instance whose `llm` pool has one slot: A judges slowly and holds the slot; B waits for it, says which run holds it,
and ends within seconds of SIGTERM; A is killed with SIGKILL while it holds the slot; C recovers A's run (failed,
slot freed) and completes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg

from rag_eval_assets_tests.llm_fault_server import llm_fault_server, schema_reply
from rag_eval_assets_tests.sample_config import REPO, write_sample_config

RAG_EVAL = REPO / ".venv" / "bin" / "rag-eval"


def _config(directory: Path, store: Path, base_url: str) -> Path:
    directory.mkdir()
    config = write_sample_config(directory, (
        "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
        f"llm: {{base_url: '{base_url}', model: m, retry: {{max_attempts: 2, base_delay: 0.0, max_delay: 0.0}}}}\n"))
    # One store for all three runs, as on a user's machine.
    config.write_text(config.read_text().replace(str(directory / "store"), str(store)), encoding="utf-8")
    return config


def _start(config: Path, env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(RAG_EVAL), "--config", str(config), "run"], env=env, cwd=config.parent,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_killed_run_never_blocks_the_next(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")  # the llm pool has one slot
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    store = tmp_path / "store"
    started = []
    with llm_fault_server(responder=schema_reply, delay_s=5.0) as slow, \
            llm_fault_server(responder=schema_reply) as fast, dg.DagsterInstance.from_config(str(home)) as instance:
        try:
            a = _start(_config(tmp_path / "a", store, slow.base_url), env, tmp_path / "a.log")
            started.append(a)

            def holder():
                return instance.event_log_storage.get_concurrency_info("llm").active_run_ids
            (a_run,) = _wait(holder, 240, "run A to hold the llm slot")

            b = _start(_config(tmp_path / "b", store, fast.base_url), env, tmp_path / "b.log")
            started.append(b)
            said = _wait(lambda: re.search(r"waiting for a slot of pool llm \(limit 1\): held by run (\S+) "
                                           r"\(answer_grid_job, step judged_answers, pid (\d+)\) since [-\d: ]+ UTC",
                                           (tmp_path / "b.log").read_text()), 240, "run B to say it waits")
            assert (said.group(1), int(said.group(2))) == (a_run, a.pid)
            os.kill(b.pid, signal.SIGTERM)
            stopped = time.monotonic()
            assert b.wait(timeout=20) == 130 and time.monotonic() - stopped < 10
            assert re.search(r"interrupted while waiting for a slot of pool llm: run \S+ canceled$",
                             (tmp_path / "b.log").read_text().strip())
            (b_run,) = [r for r in instance.get_runs(dg.RunsFilter(job_name="answer_grid_job"))
                        if r.run_id != a_run and r.tags.get("rag_eval/pid") == str(b.pid)]
            assert b_run.status == dg.DagsterRunStatus.CANCELED

            os.killpg(a.pid, signal.SIGKILL)
            a.wait(timeout=20)
            assert instance.get_run_by_id(a_run).status == dg.DagsterRunStatus.STARTED  # nobody noticed yet
            assert holder() == {a_run}

            c = subprocess.run([str(RAG_EVAL), "--config", str(tmp_path / "b" / "rag_eval.yaml"), "run"], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=600)
        finally:
            for process in started:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        lines = c.stdout.splitlines()
        assert lines[0].startswith(f"rag-eval: recovered run {a_run} (answer_grid_job) of process {a.pid}, which is "
                                   "gone: marked failed, its pool slots freed"), c.stdout[:2000]
        assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]
        assert "metrics_job: succeeded" in c.stdout
        assert instance.get_run_by_id(a_run).status == dg.DagsterRunStatus.FAILURE
        assert holder() == set()
