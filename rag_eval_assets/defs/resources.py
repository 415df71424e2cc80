"""The settings resource: every asset reads the same `rag_eval.yaml`."""

import json

import dagster as dg

from rag_eval_assets.settings import Settings, load_settings


class RagEvalSettings(dg.ConfigurableResource):
    """Path of the project configuration file (`rag_eval.yaml`), and the command line's overrides of its values
    (JSON: `rag-eval run --spot-check N`'s judge settings)."""

    config_path: str
    overrides: str = "{}"

    def load(self) -> Settings:
        return load_settings(self.config_path, json.loads(self.overrides))


class LLMResource(dg.ConfigurableResource):
    """The API key of the configured LLM endpoint, read from an environment variable through `dg.EnvVar`, so it
    never appears in run config, metadata, logs or run directories. Endpoint and model come from rag_eval.yaml."""

    api_key: str | None = None
