"""`kind: hybrid`: fusion of one lexical and one semantic retriever (retrieval/hybrid.py), by reciprocal rank (rrf)
or min-max normalised scores (convex). `of` names the two variants it fuses; each part's kind declares its role."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.retrieval.registry import KINDS, BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.retrievers import HybridRetriever
from rag_eval_assets.settings_base import Section, at_least, between, problem


def _two(names: tuple[str, ...]) -> tuple[str, ...]:
    if len(names) != 2:
        raise problem(f"names two retrievers (one lexical, one semantic), got {len(names)}")
    return names


class HybridSettings(Section):
    of: Annotated[tuple[StrictStr, ...], AfterValidator(_two)] = ("bm25", "dense")
    method: Literal["rrf", "convex"] = "rrf"
    rrf_k: Annotated[StrictInt, at_least(0)] = 60
    alpha: Annotated[StrictFloat, between(0, 1)] = 0.5  # convex: weight of the lexical side
    candidate_depth: Annotated[StrictInt, at_least(1)] = 100


class HybridKind:
    name: ClassVar[str] = "hybrid"
    Params: ClassVar[type[BaseModel]] = HybridSettings
    own_answers: ClassVar[bool] = False
    role: ClassVar[str | None] = None

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [need for part in variant.parts for need in KINDS[part.kind].needs(part, language)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> HybridRetriever:
        parts = {KINDS[p.kind].role: KINDS[p.kind].build(p, indexes) for p in variant.parts}
        h = variant.params
        return HybridRetriever(parts["lexical"], parts["semantic"], h.method, h.rrf_k, float(h.alpha),
                               h.candidate_depth)


KIND = HybridKind()
