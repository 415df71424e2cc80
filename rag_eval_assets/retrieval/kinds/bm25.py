"""`kind: bm25`: BM25 over the corpus' analyzer (retrieval/bm25.py). Its index family, `bm25_index`, stores term
frequencies, so k1, b and the variant are applied when the retriever is built: two BM25 variants share one index,
and changing k1 re-runs only the retrievers that use it."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, StrictFloat

from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Params, TermFrequencies
from rag_eval_assets.retrieval.index_families import BuiltIndex, IndexEnv, IndexFamily, IndexNeed
from rag_eval_assets.retrieval.index_tables import bm25_from_frame, bm25_to_frame
from rag_eval_assets.retrieval.registry import BuiltIndexes, Variant
from rag_eval_assets.retrieval.retrievers import Bm25Retriever
from rag_eval_assets.settings_base import Section, at_least, between


def _build(need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> BuiltIndex:
    analyzer = get_analyzer(need.spec)
    counts = TermFrequencies.count([analyzer(t) for t in chunks["text"]])
    return BuiltIndex(counts, {"analyzer": analyzer.name}, {"terms": len(counts.terms), "chunks": len(chunks)})


BM25_INDEX = IndexFamily(
    name="bm25_index",
    description="Term counts of every (term, chunk) under the corpus analyzer; BM25's k1, b and variant apply at "
                "search.",
    build=_build,
    to_table=bm25_to_frame,
    from_table=lambda table, need, chunks, env: bm25_from_frame(table, chunks["chunk_id"]),
    version=lambda need: {"analyzer": get_analyzer(need.spec).name},
    reads=lambda need: {"language": need.spec},
)


class Bm25Settings(Section):
    k1: Annotated[StrictFloat, at_least(0)] = 0.9  # Lucene / Anserini defaults
    b: Annotated[StrictFloat, between(0, 1)] = 0.4
    variant: Literal["lucene", "okapi", "atire"] = "lucene"


def params_of(params: Bm25Settings) -> BM25Params:
    return BM25Params(variant=params.variant, k1=float(params.k1), b=float(params.b), epsilon=0.25)


class Bm25Kind:
    name: ClassVar[str] = "bm25"
    Params: ClassVar[type[BaseModel]] = Bm25Settings
    own_answers: ClassVar[bool] = False
    role: ClassVar[str | None] = "lexical"

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [IndexNeed(BM25_INDEX, language, language)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> Bm25Retriever:
        (need,) = self.needs(variant, indexes.language)
        return Bm25Retriever(indexes.get(need).with_params(params_of(variant.params)), get_analyzer(need.spec))


KIND = Bm25Kind()
