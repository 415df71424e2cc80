"""Jobs: inputs (evalset, corpus, chunks, indexes), the partitioned evaluation grid, and the metric tables.

Assets with different partitioning cannot share a run, so the whole pipeline is these jobs in this order; the CLI,
`make run` and the nightly schedule all go through them. Every run of one pipeline carries the same PIPELINE_TAG,
and its tables become the ones readers see only when its last stage has succeeded (commit_pipeline).
"""

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone

import dagster as dg

from rag_eval_assets.defs.partitions import SUT_GROUP, answer_grid_partitions, retriever_partitions, sut_partitions
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.settings import Settings

INPUTS_JOB = "inputs_job"
SUT_JOB = "sut_job"
GRID_JOB = "retrieval_grid_job"
ANSWER_GRID_JOB = "answer_grid_job"
METRICS_JOB = "metrics_job"

# Two steps at a time within a run: the default machine has two cores (the run queue allows two runs).
BOUNDED = dg.multiprocess_executor.configured({"max_concurrent": 2})

inputs_job = dg.define_asset_job(
    INPUTS_JOB, selection=dg.AssetSelection.groups("inputs", "index"), executor_def=BOUNDED
)
# The services under test, one call per question each (none configured: an empty job no stage runs).
sut_job = dg.define_asset_job(SUT_JOB, selection=dg.AssetSelection.groups(SUT_GROUP), executor_def=BOUNDED)
retrieval_grid_job = dg.define_asset_job(
    GRID_JOB, selection=dg.AssetSelection.assets("retrieval_results"), executor_def=BOUNDED
)
answer_grid_job = dg.define_asset_job(
    ANSWER_GRID_JOB, selection=dg.AssetSelection.assets("answers", "judged_answers"), executor_def=BOUNDED
)
metrics_job = dg.define_asset_job(
    METRICS_JOB,
    executor_def=BOUNDED,
    selection=dg.AssetSelection.assets(
        "retrieval_metrics_per_query",
        "retrieval_metrics",
        "generated_queries",
        "answer_metrics_per_query",
        "answer_metrics",
        "evaluation_run",
        "run_comparison",
    ),
)
JOBS = [inputs_job, sut_job, retrieval_grid_job, answer_grid_job, metrics_job]
# The full event log stays in the instance (and the UI, and rag-eval's log file); the terminal is the caller's, which
# says why a run failed (Dagster's console printed each failed step's stack trace twice).
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass(frozen=True)
class StepOutcome:
    job: str
    partition: str | None
    result: dg.ExecuteInProcessResult


def pipeline_stages(settings: Settings) -> list[tuple[str, list[str | None]]]:
    """(job, partition keys) in the order the pipeline runs: inputs, the services under test, retrieval grid, answer
    grid, metrics + report."""
    suts = sut_partitions(settings).get_partition_keys()
    return [
        (INPUTS_JOB, [None]),
        *([(SUT_JOB, suts)] if suts else []),
        (GRID_JOB, retriever_partitions(settings).get_partition_keys()),
        (ANSWER_GRID_JOB, answer_grid_partitions(settings).get_partition_keys()),
        (METRICS_JOB, [None]),
    ]


def commit_pipeline(settings: Settings, pipeline: str) -> list[str]:
    """Make the tables `pipeline` wrote current, in one put of current.json; the entries committed."""
    return TableStore(settings.assets_dir).commit(pipeline)


def run_pipeline(
    defs: dg.Definitions,
    settings: Settings,
    instance: dg.DagsterInstance,
    tags: Mapping[str, str] | None = None,
    around: Callable[[str], AbstractContextManager] = lambda run_id: nullcontext(),
) -> Iterator[StepOutcome]:
    """Every stage in order, in this process; stop at the first failed run. Each run gets `tags` and the pipeline's
    PIPELINE_TAG, and executes inside `around(run_id)`. After the last stage succeeded, the tables commit."""
    pipeline = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    tags = {**(tags or {}), PIPELINE_TAG: pipeline}
    for job_name, partitions in pipeline_stages(settings):
        for partition in partitions:
            run_id = str(uuid.uuid4())
            with around(run_id):
                result = defs.resolve_job_def(job_name).execute_in_process(
                    instance=instance, partition_key=partition, raise_on_error=False, run_config=QUIET_CONSOLE,
                    run_id=run_id, tags=tags,
                )
            yield StepOutcome(job_name, partition, result)
            if not result.success:
                return
    commit_pipeline(settings, pipeline)
