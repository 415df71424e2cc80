"""The Dagster code location: `dagster dev -w workspace.yaml` and the `dg` CLI load `defs` from here."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from rag_eval_assets.defs.answers.assets import answer_defs
from rag_eval_assets.defs.automation import automation_defs
from rag_eval_assets.defs.code_versions import with_code_versions
from rag_eval_assets.defs.fingerprints import fingerprint_defs
from rag_eval_assets.defs.inputs.definitions import inputs_defs
from rag_eval_assets.defs.jobs import JOBS
from rag_eval_assets.defs.report.assets import report_defs
from rag_eval_assets.defs.resources import LLMResource, RagEvalSettings
from rag_eval_assets.defs.retrieval.assets import retrieval_defs
from rag_eval_assets.defs.storage.parquet_io_manager import ParquetIOManagerResource
from rag_eval_assets.redaction import install_log_redaction
from rag_eval_assets.settings import Settings, default_config_path, load_settings

# Every Dagster process of this code location (webserver, daemon, run and step workers) imports this module: its
# logs, and so the event log and compute logs, name URLs without their credentials.
install_log_redaction()


def build_defs(config_path: str | Path | None = None) -> dg.Definitions:
    settings = load_settings(config_path)
    shared = dg.Definitions(
        jobs=JOBS,
        resources={
            "settings": RagEvalSettings(config_path=str(settings.config_file)),
            "io_manager": ParquetIOManagerResource(base_path=settings.assets_dir),
            "llm": _llm_resource(settings),
        },
    )
    domains = dg.Definitions.merge(
        fingerprint_defs(settings), inputs_defs(), retrieval_defs(settings), answer_defs(settings), report_defs()
    )
    # Each asset's code version takes in the settings it reads (defs/code_versions.py).
    versioned = dg.Definitions(assets=with_code_versions(domains.assets, settings), asset_checks=domains.asset_checks)
    return dg.Definitions.merge(shared, versioned, automation_defs(settings))


def _llm_resource(settings: Settings) -> LLMResource:
    # The key stays an environment variable reference: Dagster resolves it at run time and never shows its value.
    if settings.llm is not None and settings.llm.api_key_env:
        return LLMResource(api_key=dg.EnvVar(settings.llm.api_key_env))
    return LLMResource()


@dg.definitions
def defs() -> dg.Definitions:
    # Built when a Dagster tool loads the code location, not on import: `rag-eval evaluate` and friends import
    # build_defs from here and must work from a directory that has no rag_eval.yaml.
    return build_defs(default_config_path())
