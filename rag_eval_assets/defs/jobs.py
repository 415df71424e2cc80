"""Jobs: inputs (evalset, corpus, chunks, indexes), the partitioned evaluation grid, and the metric tables.

Assets with different partitioning cannot share a run, so the whole pipeline is these jobs in this order; the CLI,
`make run` and the nightly schedule all go through them, each run materializing only what is missing or stale
(defs/staleness.py). Every run of one pipeline carries the same PIPELINE_TAG, and its tables become the ones
readers see, and its run directory a good run, only when its last run has succeeded (commit_pipeline).
"""

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone

import dagster as dg

from rag_eval_assets.defs.fingerprints import GRADES_FILE, RETRIEVER_CONFIG
from rag_eval_assets.defs.partitions import SUT_GROUP, answer_grid_partitions, retriever_partitions, sut_partitions
from rag_eval_assets.defs.staleness import Planner, Stage, Step, every_step
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import CommitConflict, TableStore
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.status import mark_good, mark_pipeline_failed
from rag_eval_assets.settings import Settings

INPUTS_JOB = "inputs_job"
SUT_JOB = "sut_job"
GRID_JOB = "retrieval_grid_job"
ANSWER_GRID_JOB = "answer_grid_job"
METRICS_JOB = "metrics_job"

# The jobs that fan out, whose steps execute on the cluster of rag_eval.yaml's execution.dask (defs/executors.py):
# the inputs (the encode steps of dense_index), the retrieval grid, the answer grid. The services under test, the
# metrics and the run directory stay on the host.
CLUSTER_JOBS = (INPUTS_JOB, GRID_JOB, ANSWER_GRID_JOB)

# A launched run (a night's, the UI's, a backfill's) executes its steps one after another in its own process, as
# `rag-eval run` executes them; the run queue's two runs at a time use the two cores. The multiprocess executor
# started a process per step, each importing the code location again: a night on the sample took 4.3 times
# `rag-eval run` (docs/deployment.md, "How long a night takes").
STEPS_IN_RUN_PROCESS = dg.in_process_executor

STAGE_SELECTIONS = {
    INPUTS_JOB: dg.AssetSelection.groups("inputs", "index"),
    # The services under test, one call per question each (none configured: an empty job no stage runs).
    SUT_JOB: dg.AssetSelection.groups(SUT_GROUP),
    GRID_JOB: dg.AssetSelection.assets(RETRIEVER_CONFIG, "retrieval_results"),
    ANSWER_GRID_JOB: dg.AssetSelection.assets("answers", "judged_answers"),
    METRICS_JOB: dg.AssetSelection.assets(
        "retrieval_metrics_per_query",
        "retrieval_metrics",
        "generated_queries",
        "answer_metrics_per_query",
        "answer_metrics",
        GRADES_FILE,
        "evaluation_run",
        "run_comparison",
    ),
}
inputs_job, sut_job, retrieval_grid_job, answer_grid_job, metrics_job = JOBS = [
    dg.define_asset_job(name, selection=selection, executor_def=STEPS_IN_RUN_PROCESS)
    for name, selection in STAGE_SELECTIONS.items()
]
# The full event log stays in the instance (and the UI, and rag-eval's log file); the terminal is the caller's, which
# says why a run failed (Dagster's console printed each failed step's stack trace twice).
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# A run executed in this process, or by its job's executor (on the cluster).
RunResult = dg.ExecuteInProcessResult | dg.JobExecutionResult


@dataclass(frozen=True)
class StepOutcome:
    job: str
    partition: str | None
    result: RunResult
    assets: tuple[dg.AssetKey, ...]  # what the run was to materialize


def pipeline_stages(settings: Settings) -> list[Stage]:
    """(job, its assets, partition keys) in the order the pipeline runs: inputs, the services under test, retrieval
    grid, answer grid, metrics + report."""
    suts = sut_partitions(settings).get_partition_keys()
    partitions = {
        INPUTS_JOB: [None],
        SUT_JOB: suts,
        GRID_JOB: retriever_partitions(settings).get_partition_keys(),
        ANSWER_GRID_JOB: answer_grid_partitions(settings).get_partition_keys(),
        METRICS_JOB: [None],
    }
    return [(job, selection, partitions[job]) for job, selection in STAGE_SELECTIONS.items() if partitions[job]]


def commit_pipeline(settings: Settings, pipeline: str) -> list[str]:
    """Make the tables `pipeline` wrote current, in one put of current.json, then its run directory good (a later
    run may take it as its baseline: runs/status.py); the entries committed. When another pipeline committed
    meanwhile what this one did not recompute (CommitConflict, re-raised), its run directory is failed with why."""
    run_dirs = list_runs(settings.runs_dir)
    try:
        committed = TableStore(settings.assets_dir).commit(pipeline)
    except CommitConflict as exc:
        mark_pipeline_failed(run_dirs, pipeline, [str(exc)])
        raise
    mark_good(run_dirs, pipeline)
    return committed


def run_pipeline(
    defs: dg.Definitions,
    settings: Settings,
    instance: dg.DagsterInstance,
    tags: Mapping[str, str] | None = None,
    around: Callable[[str], AbstractContextManager] = lambda run_id: nullcontext(),
    force: bool = False,
    on_cluster: Callable[[Step, str, Mapping[str, str]], RunResult] | None = None,
    pipeline: str | None = None,
) -> Iterator[StepOutcome]:
    """In this process, stage by stage, the runs that materialize what is missing or stale (Planner.next_steps),
    asking again after each wave until nothing is; `force`: every asset of every stage, once. Stops at the first
    failed run. Each run gets `tags` and the PIPELINE_TAG `pipeline` (None: a new one), and executes inside
    `around(run_id)`; a run of CLUSTER_JOBS through `on_cluster(step, run_id, tags)` when given (execution.dask:
    definitions.py's cluster_runs), whose executor sends its steps to the cluster. When every run succeeded, the
    tables commit."""
    pipeline = pipeline or f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    tags = {**(tags or {}), PIPELINE_TAG: pipeline}
    asset_graph = defs.resolve_asset_graph()
    stages = pipeline_stages(settings)
    done: set[tuple[str, str | None]] = set()

    def planned() -> list[Step]:
        return Planner(asset_graph, settings, instance, pipeline).next_steps(stages, done)

    steps = every_step(asset_graph, stages) if force else planned()
    while steps:
        for step in steps:
            run_id = str(uuid.uuid4())
            with around(run_id):
                if on_cluster is not None and step.job in CLUSTER_JOBS:
                    result = on_cluster(step, run_id, tags)
                else:
                    result = defs.resolve_job_def(step.job).execute_in_process(
                        instance=instance, partition_key=step.partition, asset_selection=list(step.assets),
                        raise_on_error=False, run_config=QUIET_CONSOLE, run_id=run_id, tags=tags,
                    )
            yield StepOutcome(step.job, step.partition, result, step.assets)
            if not result.success:
                TableStore(settings.assets_dir).release(pipeline)
                return
        done.update((step.job, step.partition) for step in steps)
        steps = [] if force else planned()
    commit_pipeline(settings, pipeline)
