"""`kind: bm25`: BM25 over the corpus' analyzer (retrieval/bm25.py). The index stores term frequencies, so k1, b
and the variant are applied when the retriever is built: two BM25 variants share one index, and changing k1
re-runs only the retrievers that use it."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, StrictFloat

from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Params
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.retrievers import Bm25Retriever
from rag_eval_assets.settings_base import Section, at_least, between

BM25_INDEX = "bm25_index"


class Bm25Params(Section):
    k1: Annotated[StrictFloat, at_least(0)] = 0.9  # Lucene / Anserini defaults
    b: Annotated[StrictFloat, between(0, 1)] = 0.4
    variant: Literal["lucene", "okapi", "atire"] = "lucene"


def params_of(params: Bm25Params) -> BM25Params:
    return BM25Params(variant=params.variant, k1=float(params.k1), b=float(params.b), epsilon=0.25)


class Bm25Kind:
    name: ClassVar[str] = "bm25"
    Params: ClassVar[type[BaseModel]] = Bm25Params
    own_answers: ClassVar[bool] = False
    score_column: ClassVar[str | None] = "score_bm25"

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [IndexNeed(BM25_INDEX, language, language)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> Bm25Retriever:
        (need,) = self.needs(variant, indexes.language)
        return Bm25Retriever(indexes.get(need).with_params(params_of(variant.params)), get_analyzer(need.spec))


KIND = Bm25Kind()
