"""The retriever part of rag_eval.yaml: `retrieval:` with each kind's default parameters (the kinds' own models,
retrieval/kinds/) and the search options every retriever shares. `retrievers:` is resolved by the registry
(retrieval/registry.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import StrictBool

from rag_eval_assets.retrieval.kinds.bm25 import Bm25Settings
from rag_eval_assets.retrieval.kinds.dense import DenseSettings
from rag_eval_assets.retrieval.kinds.http import HttpSettings
from rag_eval_assets.retrieval.kinds.hybrid import HybridSettings
from rag_eval_assets.settings_base import Section


class RetrievalSettings(Section):
    level: Literal["chunk", "doc"] = "chunk"  # doc: BEIR-comparable, each document's best chunk
    folder_filter: StrictBool = False  # search each question only under its `folders` (seed 002); adds scope_miss_rate
    # Each kind's parameters, the defaults of every variant of that kind (and the whole of the short list form).
    bm25: Bm25Settings = Bm25Settings()
    dense: DenseSettings = DenseSettings()
    hybrid: HybridSettings = HybridSettings()
    http: HttpSettings = HttpSettings()
