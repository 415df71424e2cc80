"""The settings resource: every asset reads the same `rag_eval.yaml`."""

import json
from pathlib import Path

import dagster as dg

from rag_eval_assets.defs.loaded_config import CONFIG_TAG, changed_since
from rag_eval_assets.settings import Settings, load_settings


class RagEvalSettings(dg.ConfigurableResource):
    """Path of the project configuration file (`rag_eval.yaml`), the command line's overrides of its values
    (JSON: `rag-eval run --spot-check N`'s judge settings), and the file's sha256 when the code location read it."""

    config_path: str
    overrides: str = "{}"
    loaded_sha256: str = ""

    def load(self) -> Settings:
        return load_settings(self.config_path, json.loads(self.overrides))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # A run made by a code location from another version of the file than the one this run reads would mix the
        # two (defs/loaded_config.py): it stops before its first step. Which version: the one the run was planned
        # from (CONFIG_TAG, a night's run), else the one the code location that made the run had loaded. A
        # re-execution carries its parent's tags, the planned version among them, but is made by the code location
        # as it is now: that one's, so a night re-executed after a reload runs.
        run = context.run
        planned = ((run.tags.get(CONFIG_TAG) if run.parent_run_id is None else None)
                   or _loaded_by_its_code_location(context.instance, run)) if run else None
        if planned:
            changed = changed_since(Path(self.config_path), planned)
            if changed is not None:
                raise ConfigChangedError(changed)


def _loaded_by_its_code_location(instance: dg.DagsterInstance | None, run: dg.DagsterRun) -> str | None:
    """The loaded_sha256 of the code location that made `run` (the UI's, a backfill's daemon's, `rag-eval`'s), from
    the job snapshot stored with the run: every run carries one, and it holds this resource's values as that code
    location had them. The run's own process rebuilt the code location from the file as it is now."""
    if instance is None or run.job_snapshot_id is None:
        return None
    for mode in instance.get_job_snapshot(run.job_snapshot_id).mode_def_snaps:
        for resource in mode.resource_def_snaps:
            field = resource.config_field_snap
            values = json.loads(field.default_value_as_json_str) if field and field.default_value_as_json_str \
                else None
            if isinstance(values, dict) and "loaded_sha256" in values:
                return values["loaded_sha256"]
    return None


class ConfigChangedError(Exception):
    """rag_eval.yaml is not the file the run was planned from."""


class LLMResource(dg.ConfigurableResource):
    """The API key of each role's LLM endpoint (llm/settings.py ROLES), read from the environment variable its
    `api_key_env` names through `dg.EnvVar`, so it never appears in run config, metadata, logs or run directories.
    Endpoints and models come from rag_eval.yaml (Settings.llm_for)."""

    answerer_api_key: str | None = None
    judge_api_key: str | None = None
    query_generation_api_key: str | None = None
    ragas_api_key: str | None = None

    def key(self, role: str) -> str | None:
        return getattr(self, f"{role}_api_key")
