"""Runs whose steps execute on an existing dask.distributed cluster, through dagster-dask.

With rag_eval.yaml's `execution.dask`, the jobs that fan out (jobs.CLUSTER_JOBS: the inputs with their encode
steps, the retrieval grid, the answer grid) are defined with `cluster_executor` (`jobs_on_cluster`), and so is the
code location's default executor (the UI's Materialize runs the implicit asset job): every run of them executes its
steps on the cluster, however it was launched (UI, `rag-eval run` and a night's run through `execute_run_of`,
`rag-eval backfill`, a re-execution). Without it the jobs keep their own executor, and `definitions.execute_on_dask`
runs one of them on a cluster named in its run config instead. Dask workers rebuild the job from the run's code
pointer, so each worker needs this package installed, RAG_EVAL_CONFIG pointing at the same rag_eval.yaml (importing
the code location reads it), the corpus and evalset at the same paths, the storage, and the Dagster instance
(workers write the step events to it).

`dask_cluster_executor` takes dagster-dask's run config for an existing cluster and executes each step with
dagster-dask's own worker function (`query_on_dask_worker`). It submits the steps itself because
`dagster_dask.dask_executor`, as pinned, cannot run this pipeline:
- it names each dask task `<job>.<step>`, so simultaneous runs of one job (the partitions of a grid) share one
  task and all but one report another run's events (dagster-io/dagster#21418);
- dask walks tuples in task arguments, and the DagsterRun it passes (a named tuple) holds a `@record` that
  forbids iteration whenever a step uses a pool (the answer grid's `llm` pool), so those runs fail at submission.
A step whose upstream step failed is not executed (NOT_EXECUTED), as Dagster's own executors skip it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster._core.errors import raise_execution_interrupts
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import execute_run
from dagster._core.execution.retries import RetryMode
from dagster._utils import iterate_with_context
from dagster_shared.record import replace
from dagster_dask.executor import get_dask_resource_requirements, query_on_dask_worker
from distributed import Client, Future, as_completed

from rag_eval_assets.defs.jobs import CLUSTER_JOBS, QUIET_CONSOLE
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.execution_settings import DaskSettings

EXECUTOR_TAG = "rag_eval/executor"  # dask, on a run whose steps a cluster executed
SCHEDULER_TAG = "rag_eval/dask_scheduler"  # its scheduler's address, credentials redacted

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


# What a step's task returns when a step it depends on failed or was not executed itself.
NOT_EXECUTED = "not executed"


def _execute_step(upstream: list, task: _StepTask) -> str:
    """The step's events, serialised: dask cannot measure the size of Dagster's records, which forbid iteration.
    NOT_EXECUTED when a step it depends on failed or was not executed, as Dagster's own executors skip such a step:
    run, it failed again on inputs never written, and said so as if it were another reason the run failed."""
    # `upstream` holds the upstream steps' results, so that dask starts this task after them.
    if any(result == NOT_EXECUTED or any(event.is_step_failure for event in dg.deserialize_value(result, list))
           for result in upstream):
        return NOT_EXECUTED
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
        shown = redact_url(self.scheduler_address)
        # Where the run ran, in the UI's run list and run page.
        plan_context.instance.add_run_tags(run.run_id, {EXECUTOR_TAG: "dask", SCHEDULER_TAG: shown})
        with Client(self.scheduler_address) as client:
            yield DagsterEvent.engine_event(plan_context, f"executing each step on the dask scheduler at {shown}",
                                            EngineEventData())
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
            step_of = {future.key: step for step, future in futures.items()}
            for future, events in iterate_with_context(raise_execution_interrupts, completed):
                if events == NOT_EXECUTED:
                    yield DagsterEvent.engine_event(plan_context, f"step {step_of[future.key]} not executed: a step "
                                                                  "it depends on failed", EngineEventData())
                    continue
                yield from dg.deserialize_value(events, list)
                yield DagsterEvent.engine_event(plan_context, f"step {step_of[future.key]} ran on dask worker "
                                                              f"{_worker_of(client, future)}", EngineEventData())


def _worker_of(client: Client, future: Future) -> str:
    """The name and address of the worker that holds `future`'s result: the one that ran it."""
    holders = client.who_has([future]).get(future.key, ())
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return ", ".join(f"{workers.get(a, {}).get('name', '?')} ({a})" for a in holders) or "unknown (result gone)"


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


def cluster_executor(dask: DaskSettings) -> dg.ExecutorDefinition:
    """The executor of the cluster `dask` names. Its address is read when a run starts, in the process that
    orchestrates it: not run config, which every worker resolves again (an `address_env` would be needed there)."""

    @dg.executor(name="dask", requirements=dg.multiple_process_executor_requirements())
    def dask_from_settings(init_context: dg.InitExecutorContext) -> DaskClusterExecutor:
        """Each step of a run executes as one task on the dask.distributed scheduler of rag_eval.yaml's
        execution.dask."""
        return DaskClusterExecutor(dask.scheduler_address())

    return dask_from_settings


def jobs_on_cluster(
    dask: DaskSettings, jobs: Sequence[dg.UnresolvedAssetJobDefinition]
) -> tuple[list[dg.UnresolvedAssetJobDefinition], dg.ExecutorDefinition]:
    """`jobs`, those of CLUSTER_JOBS on the cluster of `dask`, and the cluster's executor, for the code location's
    default."""
    executor = cluster_executor(dask)
    return [replace(job, executor_def=executor) if job.name in CLUSTER_JOBS else job for job in jobs], executor


def execute_run_of(
    job: ReconstructableJob,
    instance: dg.DagsterInstance,
    *,
    partition_key: str | None = None,
    asset_selection: Sequence[dg.AssetKey] | None = None,
    run_id: str | None = None,
    tags: Mapping[str, str] | None = None,
    run_config: Mapping[str, Any] = QUIET_CONSOLE,
) -> dg.JobExecutionResult:
    """One run of `job` (of its partition `partition_key`, of `asset_selection`; as run `run_id` when given) by the
    job's own executor, from this process: on a cluster, each step is executed by a worker, which rebuilds the job
    from `job`'s pointer. `instance` must be persistent and reachable from the workers. An unknown partition is
    refused before any run is created."""
    job_def = job.get_definition()
    run_tags = {**job_def.run_tags, **(tags or {})}
    if partition_key is not None:
        if job_def.partitions_def is None or not job_def.partitions_def.has_partition_key(partition_key):
            raise dg.DagsterUnknownPartitionError(f"{job_def.name} has no partition {partition_key!r}")
        run_tags.update(job_def.get_tags_for_partition_key(partition_key, None))
    run = instance.create_run_for_job(
        job_def=job_def, run_id=run_id, run_config=run_config, tags=run_tags, job_code_origin=job.get_python_origin(),
        asset_selection=frozenset(asset_selection) if asset_selection else None,
    )
    return execute_run(job, run, instance)


def execute_job_on_dask(
    job: ReconstructableJob,
    scheduler_address: str,
    instance: dg.DagsterInstance,
    partition_key: str | None = None,
) -> dg.JobExecutionResult:
    """One run of `job` (of its partition `partition_key`), each step executed by a worker of the cluster at
    `scheduler_address`, which rebuilds the job from `job`'s pointer. `instance` must be persistent and reachable
    from the workers."""
    return execute_run_of(job, instance, partition_key=partition_key,
                          run_config={**QUIET_CONSOLE, **dask_run_config(scheduler_address)})
