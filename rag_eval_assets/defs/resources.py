"""The settings resource: every asset reads the same `rag_eval.yaml`."""

import json
from pathlib import Path

import dagster as dg

from rag_eval_assets.defs.loaded_config import CONFIG_TAG, changed_since
from rag_eval_assets.settings import Settings, load_settings


class RagEvalSettings(dg.ConfigurableResource):
    """Path of the project configuration file (`rag_eval.yaml`), and the command line's overrides of its values
    (JSON: `rag-eval run --spot-check N`'s judge settings)."""

    config_path: str
    overrides: str = "{}"

    def load(self) -> Settings:
        return load_settings(self.config_path, json.loads(self.overrides))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # A run planned by a code location from another version of the file than the one this run reads would mix
        # the two (defs/loaded_config.py): it stops before its first step.
        planned = context.dagster_run.tags.get(CONFIG_TAG) if context.dagster_run else None
        if planned is not None:
            changed = changed_since(Path(self.config_path), planned)
            if changed is not None:
                raise ConfigChangedError(changed)


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
