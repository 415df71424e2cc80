"""A night's run: one run of nightly_job, launched by the daemon (from the 02:00 schedule or `rag-eval nightly`),
whose op executes the pipeline as `rag-eval run` does, in its own process: each stage's runs (tagged with the night
and its pipeline, in the UI's run list like any run) as soon as the stage before has succeeded, on the cluster when
execution.dask says so; then the tables commit. A chain of launched runs, one per stage and partition, paid a
process and an import of the code location per run and the sensor daemon's interval at each stage: a night on the
sample took three times `rag-eval run`, against about once as one run (docs/deployment.md, "How long a night
takes"). Launched without a night's tag (the UI's Launchpad), the run is a night started now.

The op fails with what stopped the night (night_story.night_failure): the verdict when the report's gate stopped
it, else the failed run and its error."""


from collections.abc import Callable, Mapping
from datetime import datetime, timezone

import dagster as dg

from rag_eval_assets.reports.night_verdict import night_verdict

from rag_eval_assets.defs.infrastructure import check_infrastructure
from rag_eval_assets.defs.jobs import RunResult, run_pipeline
from rag_eval_assets.defs.loaded_config import CONFIG_TAG, config_sha256
from rag_eval_assets.defs.night_story import (
    NIGHT_TAG, NIGHTLY_JOB, night_failure, night_pipeline, night_run_dir, night_tags, on_demand_night, pipeline_runs,
)
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.defs.run_guard import own_tags, recover_dead_runs, watching
from rag_eval_assets.defs.staleness import Step
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import CommitConflict

# The code location the night's runs are made from, rebuilt in the night's process from the file as it is now
# (definitions.py's build_defs; an op has no Definitions of its own), and how a night's run reaches the cluster of
# execution.dask, given its instance (definitions.py's cluster_runs).
CodeLocation = Callable[[], dg.Definitions]
ClusterRuns = Callable[[dg.DagsterInstance], Callable[[Step, str, Mapping[str, str]], RunResult]]


def nightly_job(code_location: CodeLocation, cluster: ClusterRuns | None) -> dg.JobDefinition:
    """The night's job; `cluster` when execution.dask puts the fanning-out jobs on a cluster."""

    @dg.op(name="night")
    def night(context: dg.OpExecutionContext, settings: RagEvalSettings) -> None:
        """Materializes what is missing or stale, stage by stage, then commits the night's tables."""
        run, instance, loaded = context.run, context.instance, settings.load()
        name = run.tags.get(NIGHT_TAG) or on_demand_night(datetime.now(timezone.utc))
        pipeline = night_pipeline(name, run)
        # The file it runs: a re-execution copied its parent's tag, and was checked against its code location's.
        instance.add_run_tags(run.run_id, {NIGHT_TAG: name, PIPELINE_TAG: pipeline,
                                           CONFIG_TAG: config_sha256(loaded.config_file)})
        # The cluster and the store answer before any run, as `rag-eval nightly` checks before it queues a night
        # (a scheduled night has no command line): an InfrastructureError, one line naming the setting.
        check_infrastructure(loaded)
        for line in recover_dead_runs(instance):
            context.log.info(f"recovered {line}")
        steps, failed = 0, False
        try:
            for step in run_pipeline(
                code_location(), loaded, instance, tags={**night_tags(name), **own_tags()},
                around=lambda run_id: watching(instance, run_id, context.log.info),
                on_cluster=cluster(instance) if cluster is not None else None, pipeline=pipeline,
            ):
                steps, failed = steps + 1, not step.result.success
                label = step.job + (f" [{step.partition}]" if step.partition else "")
                context.log.info(f"{label}: {'succeeded' if step.result.success else 'FAILED'} "
                                 f"(run {step.result.run_id})")
        except CommitConflict as exc:
            raise dg.Failure(f"night {name} ran but was not committed: {exc}") from None
        tagged = instance.get_run_by_id(run.run_id)  # with its tags as set above
        if failed:  # run_pipeline stopped at the run that failed
            raise dg.Failure(night_failure(loaded, instance, tagged)[0])
        verdict = night_verdict(night_run_dir(loaded, pipeline_runs(instance, tagged)))
        context.log.info(f"night {name} is complete: {steps} run{'' if steps == 1 else 's'}, its tables committed"
                         + (f"; verdict: {verdict[0]}" if verdict else ""))

    # In the run's own process whatever the code location's default executor is (a cluster's): the op only
    # orchestrates, its runs' steps go where their jobs say.
    @dg.job(name=NIGHTLY_JOB, executor_def=dg.in_process_executor,
            description="A night: what is missing or stale, stage by stage, then the commit of its tables.")
    def job() -> None:
        night()

    return job
