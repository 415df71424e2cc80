"""A backfill over one retriever's partitions, launched from the command line against a real Dagster instance and
run by a real daemon: exactly those partitions get materialized."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.jobs import QUIET_CONSOLE
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets_tests.sample_config import REPO, write_sample_config

BIN = Path(sys.executable).parent


@pytest.fixture
def home(tmp_path, monkeypatch):
    config = write_sample_config(
        tmp_path, "retrievers: [bm25, dense]\nk_values: [3, 5]\nanswering: {k_values: [3, 5]}\n"
    )
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    monkeypatch.setenv("RAG_EVAL_CONFIG", str(config))
    return config


@pytest.fixture
def daemon(home):
    proc = subprocess.Popen(
        [str(BIN / "dagster-daemon"), "run", "-m", "rag_eval_assets.definitions"],
        cwd=REPO, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_backfill_of_one_retriever_materializes_exactly_its_partitions(home, daemon):
    defs = build_defs(home)
    with dg.DagsterInstance.get() as instance:
        for job, key in [("inputs_job", None), ("retrieval_grid_job", "bm25"), ("retrieval_grid_job", "dense")]:
            assert defs.resolve_job_def(job).execute_in_process(
                instance=instance, partition_key=key, run_config=QUIET_CONSOLE).success

    assert main(["--config", str(home), "backfill", "--retriever", "bm25"]) == 0

    with dg.DagsterInstance.get() as instance:
        (backfill,) = instance.get_backfills()
        deadline = time.monotonic() + 400
        while True:
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
            finished = [r for r in runs if r.is_finished]
            if len(runs) == 2 and len(finished) == 2:
                break
            assert time.monotonic() < deadline, [(r.tags.get("dagster/partition"), r.status) for r in runs]
            time.sleep(2)
        assert {r.tags["dagster/partition"]: r.status for r in runs} == {
            "3|bm25": dg.DagsterRunStatus.SUCCESS,
            "5|bm25": dg.DagsterRunStatus.SUCCESS,
        }
        for asset in ("answers", "judged_answers"):
            assert instance.get_materialized_partitions(dg.AssetKey(asset)) == {"3|bm25", "5|bm25"}
    # Backfill runs belong to no pipeline: each partition became current when its run wrote it.
    current = TableStore(home.parent / "store" / "assets").current()["tables"]
    assert sorted(entry for entry in current if entry.startswith("answers/")) == [
        "answers/retriever=bm25/k=3", "answers/retriever=bm25/k=5"
    ]


def test_backfill_rejects_a_partition_that_does_not_exist(home, capsys):
    assert main(["--config", str(home), "backfill", "--retriever", "splade"]) == 2
    assert "no partition of answer_grid_job matches --retriever splade" in capsys.readouterr().err
