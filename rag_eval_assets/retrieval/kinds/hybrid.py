"""`kind: hybrid`: fusion of one lexical and one dense retriever (retrieval/hybrid.py), by reciprocal rank (rrf) or
min-max normalised scores (convex). `of` names the two variants it fuses."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag_eval_assets.retrieval.registry import KINDS, BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.retrievers import HybridRetriever


class HybridParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    of: list[str] = Field(default_factory=lambda: ["bm25", "dense"], min_length=2, max_length=2)
    method: Literal["rrf", "convex"] = "rrf"
    rrf_k: int = Field(60, ge=1)
    alpha: float = Field(0.5, ge=0, le=1)  # convex: weight of the lexical side
    candidate_depth: int = Field(100, ge=1)


class HybridKind:
    name: ClassVar[str] = "hybrid"
    Params: ClassVar[type[BaseModel]] = HybridParams
    own_answers: ClassVar[bool] = False
    score_column: ClassVar[str | None] = None

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [need for part in variant.parts for need in KINDS[part.kind].needs(part, language)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> HybridRetriever:
        parts = {KINDS[p.kind].score_column: KINDS[p.kind].build(p, indexes) for p in variant.parts}
        h = variant.params
        return HybridRetriever(parts["score_bm25"], parts["score_dense"], h.method, h.rrf_k, float(h.alpha),
                               h.candidate_depth)


KIND = HybridKind()
