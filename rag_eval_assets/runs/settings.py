"""The run store's part of rag_eval.yaml: `retention:`, how many run directories are kept."""

from __future__ import annotations

from typing import Annotated

from pydantic import StrictInt

from rag_eval_assets.settings_base import Section, at_least


class RetentionSettings(Section):
    # run directories kept per evalset (runs accepted by hand and the baseline always); None: every run
    keep_runs: Annotated[StrictInt, at_least(1, "(or null: keep every run)")] | None = None
