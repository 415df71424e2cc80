"""The Dagster code location: `dagster dev -w workspace.yaml` and the `dg` CLI load `defs` from here; and the jobs
of it that `rag-eval run` and `execute_on_dask` execute out of this process (`code_location_job`, `dask_job`), which
their workers rebuild from here."""

from __future__ import annotations

import json
from functools import partial
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from rag_eval_assets.defs.answers.assets import answer_defs
from rag_eval_assets.defs.automation import automation_defs
from rag_eval_assets.defs.code_versions import with_code_versions
from rag_eval_assets.defs.fingerprints import fingerprint_defs
from rag_eval_assets.defs.inputs.definitions import inputs_defs
from rag_eval_assets.defs.jobs import JOBS, RunResult
from rag_eval_assets.defs.loaded_config import config_sha256
from rag_eval_assets.defs.report.assets import report_defs
from rag_eval_assets.defs.resources import LLMResource, RagEvalSettings
from rag_eval_assets.defs.retrieval.assets import retrieval_defs
from rag_eval_assets.llm.settings import ROLES
from rag_eval_assets.defs.staleness import Step
from rag_eval_assets.defs.storage.parquet_io_manager import ParquetIOManagerResource
from rag_eval_assets.redaction import install_log_redaction
from rag_eval_assets.settings import Settings, default_config_path, load_settings

# Every Dagster process of this code location (webserver, daemon, run and step workers) imports this module: its
# logs, and so the event log and compute logs, name URLs without their credentials.
install_log_redaction()


def build_defs(config_path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dg.Definitions:
    """The code location of configuration file `config_path`, its values overridden by `overrides` (load_settings)
    for every asset alike."""
    settings = load_settings(config_path, overrides)
    jobs, executor, cluster = JOBS, None, None
    if settings.execution.dask is not None:
        # dagster-dask and distributed only where the configuration asks for a cluster: every Dagster process
        # imports this module.
        from rag_eval_assets.defs.executors import jobs_on_cluster

        jobs, executor = jobs_on_cluster(settings.execution.dask, JOBS)
        cluster = partial(cluster_runs, settings.config_file)  # how a night's run sends them there
    shared = dg.Definitions(
        jobs=jobs,
        executor=executor,
        resources={
            "settings": RagEvalSettings(config_path=str(settings.config_file), overrides=json.dumps(overrides or {}),
                                        loaded_sha256=config_sha256(settings.config_file)),
            "io_manager": ParquetIOManagerResource(base_path=settings.assets_dir),
            "llm": _llm_resource(settings),
        },
    )
    domains = dg.Definitions.merge(
        fingerprint_defs(settings), inputs_defs(settings), retrieval_defs(settings), answer_defs(settings), report_defs(settings)
    )
    # Each asset's code version takes in the settings it reads (defs/code_versions.py).
    versioned = dg.Definitions(assets=with_code_versions(domains.assets, settings), asset_checks=domains.asset_checks)
    return dg.Definitions.merge(shared, versioned, automation_defs(settings, partial(build_defs, settings.config_file), cluster))


def _llm_resource(settings: Settings) -> LLMResource:
    # Each key stays an environment variable reference: Dagster resolves it at run time and never shows its value.
    keys = {f"{role}_api_key": dg.EnvVar(endpoint.api_key_env) for role in ROLES
            if (endpoint := settings.llm_for(role)) is not None and endpoint.api_key_env}
    return LLMResource(**keys)


def code_location_job(job_name: str, config_path: str) -> dg.JobDefinition:
    """`job_name` of the code location built from `config_path`, with its own executor. Module level, with
    JSON-serialisable arguments, because Dagster rebuilds the job from them in every worker of that executor."""
    return build_defs(config_path).resolve_job_def(job_name)


def cluster_runs(
    config_path: Path, instance: dg.DagsterInstance
) -> Callable[[Step, str, Mapping[str, str]], RunResult]:
    """How `rag-eval run` executes a run of a job that execution.dask puts on the cluster (jobs.run_pipeline's
    `on_cluster`): orchestrated from this process by the job's own executor, each step on a worker."""
    from rag_eval_assets.defs.executors import execute_run_of

    def execute(step: Step, run_id: str, tags: Mapping[str, str]) -> RunResult:
        job = dg.build_reconstructable_job(__name__, code_location_job.__name__, (step.job, str(config_path)))
        return execute_run_of(job, instance, partition_key=step.partition, asset_selection=step.assets,
                              run_id=run_id, tags=tags)

    return execute


def dask_job(job_name: str, config_path: str) -> dg.JobDefinition:
    """`job_name` of the code location built from `config_path`, its executor replaced by the dask one. Module
    level, with JSON-serialisable arguments, because Dagster rebuilds the job from them in every dask worker."""
    # dagster-dask and distributed only where a job runs on dask: every Dagster process imports this module.
    from rag_eval_assets.defs.executors import dask_cluster_executor

    return build_defs(config_path).resolve_job_def(job_name).with_executor_def(dask_cluster_executor)


def execute_on_dask(
    job_name: str,
    scheduler_address: str,
    instance: dg.DagsterInstance,
    partition_key: str | None = None,
    config_path: str | Path | None = None,
) -> dg.JobExecutionResult:
    """One run of `job_name` (of its partition `partition_key`), each step executed by a worker of the cluster.
    `instance` must be persistent and reachable from the workers. Runs of different partitions may go at once."""
    from rag_eval_assets.defs.executors import execute_job_on_dask

    config = str(Path(config_path).resolve() if config_path else default_config_path())
    job = dg.build_reconstructable_job(__name__, dask_job.__name__, (job_name, config))
    return execute_job_on_dask(job, scheduler_address, instance, partition_key)


@dg.definitions
def defs() -> dg.Definitions:
    # Built when a Dagster tool loads the code location, not on import: `rag-eval evaluate` and friends import
    # build_defs from here and must work from a directory that has no rag_eval.yaml.
    return build_defs(default_config_path())
