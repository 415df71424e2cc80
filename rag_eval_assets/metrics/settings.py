"""The metrics' part of rag_eval.yaml: `ragas:`, whether ragas' context metrics are judged by an LLM."""

from __future__ import annotations

from pydantic import StrictBool

from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.settings_base import Section


class RagasSettings(Section):
    # context_precision / context_recall judged by an LLM (ragas' LLM forms, calls and costs); off: ragas' non-LLM
    # forms, which compare the retrieved chunks with the gold ones and call nothing
    llm_metrics: StrictBool = False
    llm: LLMSettings | None = None  # their own endpoint; None: the top-level llm
