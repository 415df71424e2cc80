"""Runs whose steps execute on an existing dask.distributed cluster, through dagster-dask.

The code location's jobs keep their own executor (`rag-eval run` executes them in process, launched runs with the
multiprocess executor); `definitions.execute_on_dask` runs one of them, typically one partition of a grid job, on a
dask cluster instead, through `execute_job_on_dask`. Dask workers rebuild the job from `definitions.dask_job`, so
each worker needs this package installed, RAG_EVAL_CONFIG pointing at the same rag_eval.yaml (importing the code
location reads it), the corpus and evalset at the same paths, the storage, and the Dagster instance (workers write
the step events to it).

`dask_cluster_executor` takes dagster-dask's run config for an existing cluster and executes each step with
dagster-dask's own worker function (`query_on_dask_worker`). It submits the steps itself because
`dagster_dask.dask_executor`, as pinned, cannot run this pipeline:
- it names each dask task `<job>.<step>`, so simultaneous runs of one job (the partitions of a grid) share one
  task and all but one report another run's events (dagster-io/dagster#21418);
- dask walks tuples in task arguments, and the DagsterRun it passes (a named tuple) holds a `@record` that
  forbids iteration whenever a step uses a pool (the answer grid's `llm` pool), so those runs fail at submission.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster._core.errors import raise_execution_interrupts
from dagster._core.execution.retries import RetryMode
from dagster._utils import iterate_with_context
from dagster_dask.executor import get_dask_resource_requirements, query_on_dask_worker
from distributed import Client, Future, as_completed

from rag_eval_assets.defs.jobs import QUIET_CONSOLE

if TYPE_CHECKING:
    from dagster._core.definitions.reconstruct import ReconstructableJob
    from dagster._core.execution.context.system import PlanOrchestrationContext
    from dagster._core.execution.plan.plan import ExecutionPlan
    from dagster._core.execution.plan.state import KnownExecutionState
    from dagster._core.instance.ref import InstanceRef


@dataclass(frozen=True)
class _StepTask:
    """One step as a dask task argument: a plain object, which dask passes through without walking into it."""

    job: ReconstructableJob
    run: dg.DagsterRun
    run_config: Mapping[str, Any]
    step_key: str
    instance_ref: InstanceRef
    known_state: KnownExecutionState | None


def _execute_step(upstream: list, task: _StepTask) -> str:
    """The step's events, serialised: dask cannot measure the size of Dagster's records, which forbid iteration."""
    # `upstream` holds the upstream steps' results only so that dask starts this task after them.
    events = query_on_dask_worker(
        upstream, task.job, task.run, task.run_config, [task.step_key], task.instance_ref, task.known_state
    )
    return dg.serialize_value(list(events))


class DaskClusterExecutor(dg.Executor):
    def __init__(self, scheduler_address: str) -> None:
        self.scheduler_address = scheduler_address

    @property
    def retries(self) -> RetryMode:
        return RetryMode.DISABLED

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[dg.DagsterEvent]:
        run = plan_context.dagster_run
        futures: dict[str, Future] = {}
        with Client(self.scheduler_address) as client:
            for level in execution_plan.get_steps_to_execute_by_level():
                for step in level:
                    upstream = [futures[key] for step_input in step.step_inputs for key in step_input.dependency_keys]
                    task = _StepTask(
                        plan_context.reconstructable_job,
                        run,
                        plan_context.run_config,
                        step.key,
                        plan_context.instance.get_ref(),
                        execution_plan.known_state,
                    )
                    # The run id in the key: dask gives every submission of one key the same task.
                    futures[step.key] = client.submit(
                        _execute_step,
                        upstream,
                        task,
                        key=f"{run.job_name}.{step.key}.{run.run_id}",
                        resources=get_dask_resource_requirements(step.tags),
                    )
            # Waiting in iterate_with_context lets a run termination interrupt the wait.
            completed = as_completed(list(futures.values()), with_results=True)
            for _, events in iterate_with_context(raise_execution_interrupts, completed):
                yield from dg.deserialize_value(events, list)


@dg.executor(
    name="dask",
    config_schema={"cluster": {"existing": {"address": dg.StringSource}}},
    requirements=dg.multiple_process_executor_requirements(),
)
def dask_cluster_executor(init_context: dg.InitExecutorContext) -> DaskClusterExecutor:
    """Each step of a run executes as one task on the dask.distributed scheduler at `cluster.existing.address`."""
    return DaskClusterExecutor(init_context.executor_config["cluster"]["existing"]["address"])


def dask_run_config(scheduler_address: str) -> dict:
    """Run config for a job on the dask executor: the scheduler at `scheduler_address` (e.g. tcp://10.0.0.5:8786).
    The same shape as `dagster_dask.dask_executor`'s for an existing cluster."""
    return {"execution": {"config": {"cluster": {"existing": {"address": scheduler_address}}}}}


def execute_job_on_dask(
    job: ReconstructableJob,
    scheduler_address: str,
    instance: dg.DagsterInstance,
    partition_key: str | None = None,
) -> dg.JobExecutionResult:
    """One run of `job` (of its partition `partition_key`), each step executed by a worker of the cluster, which
    rebuilds the job from `job`'s pointer. `instance` must be persistent and reachable from the workers."""
    tags = None
    if partition_key is not None:
        job_def = job.get_definition()
        if job_def.partitions_def is None or not job_def.partitions_def.has_partition_key(partition_key):
            raise dg.DagsterUnknownPartitionError(f"{job_def.name} has no partition {partition_key!r}")
        tags = job_def.get_tags_for_partition_key(partition_key, None)
    return dg.execute_job(job, instance, run_config={**QUIET_CONSOLE, **dask_run_config(scheduler_address)}, tags=tags)
