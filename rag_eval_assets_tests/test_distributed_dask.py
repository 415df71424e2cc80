"""The evaluation grid on a real dask.distributed cluster (worker processes on loopback) through dagster-dask."""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import dagster as dg
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from rag_eval_assets.definitions import build_defs, execute_on_dask
from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, GRID_JOB, INPUTS_JOB, QUIET_CONSOLE
from rag_eval_assets.settings import CONFIG_ENV_VAR
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table

DEPTH = 3  # max(k_values): results per question
ANSWER_KS = (1, 2)
STEPS = {GRID_JOB: {"retriever_config", "retrieval_results"}, ANSWER_GRID_JOB: {"answers", "judged_answers"}}


def _run_in_own_process(job_name: str, scheduler_address: str, partition: str) -> tuple[str, str, bool]:
    """One partition run in a process of its own, as Dagster's run launcher starts runs."""
    with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME is inherited from the test
        result = execute_on_dask(job_name, scheduler_address, instance, partition)
    return partition, result.run_id, result.success


def _scheduler_task_keys(dask_scheduler) -> list[str]:
    """Every task key in the scheduler's transition log."""
    return [transition[0] for transition in dask_scheduler.transition_log]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask_grid")
    config = write_sample_config(
        tmp,
        f"retrievers: [bm25]\nk_values: [1, {DEPTH}]\nanswering: {{k_values: [{', '.join(map(str, ANSWER_KS))}]}}\n",
    )
    (tmp / "home").mkdir()
    # Both set before the cluster and the run processes start: they inherit the environment, so every process
    # loads these definitions and this instance.
    with pytest.MonkeyPatch.context() as env, dg.instance_for_test(temp_dir=str(tmp / "home")) as instance:
        env.setenv(CONFIG_ENV_VAR, str(config))
        defs = build_defs(config)
        assert defs.resolve_job_def(INPUTS_JOB).execute_in_process(instance=instance, run_config=QUIET_CONSOLE).success
        with (
            LocalCluster(host="127.0.0.1", n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
            as cluster,
            Client(cluster) as client,
        ):
            address = cluster.scheduler_address
            retrieval = execute_on_dask(GRID_JOB, address, instance, "bm25", config)
            runs = {GRID_JOB: [("bm25", retrieval.run_id, retrieval.success)]}
            # The answer grid's partitions at once, as the nightly sensor launches them: two runs of one job.
            keys = defs.resolve_job_def(ANSWER_GRID_JOB).partitions_def.get_partition_keys()
            with ProcessPoolExecutor(len(keys), mp_context=multiprocessing.get_context("spawn")) as pool:
                runs[ANSWER_GRID_JOB] = list(pool.map(_run_in_own_process, [ANSWER_GRID_JOB] * len(keys),
                                                      [address] * len(keys), keys))
            worker_pids = set(client.run(os.getpid).values())
            task_keys = set(client.run_on_scheduler(_scheduler_task_keys))
        yield {
            "assets": tmp / "store" / "assets",
            "address": address,
            "config": config,
            "defs": defs,
            "instance": instance,
            "runs": runs,
            "worker_pids": worker_pids,
            "task_keys": task_keys,
        }


def test_every_partition_run_succeeds(grid):
    assert {job: [(key, ok) for key, _, ok in runs] for job, runs in grid["runs"].items()} == {
        GRID_JOB: [("bm25", True)],
        ANSWER_GRID_JOB: [(f"{k}|bm25", True) for k in ANSWER_KS],
    }


def test_each_step_ran_as_a_task_of_the_cluster_in_a_worker_process(grid):
    instance = grid["instance"]
    assert os.getpid() not in grid["worker_pids"]
    for job, runs in grid["runs"].items():
        for _, run_id, _ in runs:
            run = instance.get_run_by_id(run_id)
            assert run.run_config["execution"]["config"]["cluster"]["existing"]["address"] == grid["address"]
            done = [e.dagster_event for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)]
            assert {e.step_key for e in done} == STEPS[job]
            # One dask task per step and run: the scheduler's log names it, and a worker process executed it.
            assert {f"{job}.{step}.{run_id}" for step in STEPS[job]} <= grid["task_keys"]
            assert {e.pid for e in done} <= grid["worker_pids"]


def test_partition_tables_hold_every_question(grid):
    assets = grid["assets"]
    questions = sorted(stored_table(assets, "evalset")["id"])
    results = stored_table(assets, "retrieval_results/retriever=bm25")
    ranks = results.groupby("query_id")["rank"].apply(list)
    assert list(ranks.index) == questions
    assert all(r == list(range(1, DEPTH + 1)) for r in ranks)
    for k in ANSWER_KS:
        answers = stored_table(assets, f"answers/retriever=bm25/k={k}")
        assert sorted(answers["query_id"]) == questions
        assert set(answers["retriever"]) == {"bm25"} and set(answers["k"]) == {k}
        assert (answers["contexts"].map(lambda c: len(json.loads(c))) == k).all()
        # No LLM is configured: the judged table is written, empty.
        assert stored_table(assets, f"judged_answers/retriever=bm25/k={k}").empty


def test_cluster_and_in_process_runs_rank_alike(grid):
    on_cluster = stored_table(grid["assets"], "retrieval_results/retriever=bm25")
    job = grid["defs"].resolve_job_def(GRID_JOB)
    assert job.execute_in_process(instance=grid["instance"], partition_key="bm25", run_config=QUIET_CONSOLE).success
    in_process = stored_table(grid["assets"], "retrieval_results/retriever=bm25")
    pd.testing.assert_frame_equal(on_cluster.drop(columns="latency_s"), in_process.drop(columns="latency_s"))


def test_an_unknown_partition_is_refused_before_any_run(grid):
    before = len(grid["instance"].get_runs())
    with pytest.raises(dg.DagsterUnknownPartitionError, match="retrieval_grid_job has no partition 'bm52'"):
        execute_on_dask(GRID_JOB, grid["address"], grid["instance"], "bm52", grid["config"])
    assert len(grid["instance"].get_runs()) == before
