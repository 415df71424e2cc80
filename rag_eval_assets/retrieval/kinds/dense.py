"""`kind: dense`: exact cosine search over one sentence encoder's chunk vectors (retrieval/dense.py). One dense index
per model and backend, shared by every variant that uses it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, StrictStr

from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.retrievers import DenseRetriever
from rag_eval_assets.settings_base import Section

DENSE_INDEX = "dense_index"


class DenseParams(Section):
    model: StrictStr = "all-MiniLM-L6-v2"  # packaged offline; "use-multilingual-v3", a local path or a cached model id


def index_key(params: DenseParams) -> str:
    """The dense index partition of a model: its name, or a local directory's name and a hash of its path."""
    name = params.model
    if "/" in name or "\\" in name:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{Path(name).name}-{digest}"
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", name)


class DenseKind:
    name: ClassVar[str] = "dense"
    Params: ClassVar[type[BaseModel]] = DenseParams
    own_answers: ClassVar[bool] = False
    score_column: ClassVar[str | None] = "score_dense"

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [IndexNeed(DENSE_INDEX, index_key(variant.params), variant.params)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> DenseRetriever:
        (need,) = self.needs(variant, indexes.language)
        index: DenseIndex = indexes.get(need)
        return DenseRetriever(index)


KIND = DenseKind()
