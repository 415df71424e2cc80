"""The retriever part of rag_eval.yaml: which kinds a run evaluates (`retrievers:`) and each kind's parameters.

Each kind's model stands alone (unknown keys are errors), so that it can validate the parameters of a retriever
wherever they are written.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, StrictBool, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.retrieval.sut_url import url_problems
from rag_eval_assets.settings_base import Loc, Section, above, at_least, between, problem

RetrieverKind = Literal["bm25", "dense", "hybrid", "http"]


class Bm25Settings(Section):
    k1: Annotated[StrictFloat, at_least(0)] = 0.9  # Lucene / Anserini defaults
    b: Annotated[StrictFloat, between(0, 1)] = 0.4
    variant: Literal["lucene", "okapi", "atire"] = "lucene"


class DenseSettings(Section):
    model: StrictStr = "all-MiniLM-L6-v2"  # packaged offline; "use-multilingual-v3", a local path or a cached model id


class HybridSettings(Section):
    method: Literal["rrf", "convex"] = "rrf"
    rrf_k: Annotated[StrictInt, at_least(0)] = 60
    alpha: Annotated[StrictFloat, between(0, 1)] = 0.5  # convex: weight of the bm25 side
    candidate_depth: Annotated[StrictInt, at_least(1)] = 100


class HttpSettings(Section):
    """A system under test that follows seed 002's debug contract."""

    base_url: StrictStr = ""
    path: StrictStr = "/api/v1/ask"
    api_key_env: StrictStr | None = None  # name of the environment variable holding the key; the key is never stored
    # name of the environment variable holding a JSON object of extra request headers (they may carry secrets)
    headers_env: StrictStr | None = None
    connect_timeout: Annotated[StrictFloat, above(0)] = 5.0
    read_timeout: Annotated[StrictFloat, above(0)] = 120.0
    max_attempts: Annotated[StrictInt, at_least(1)] = 5

    @classmethod
    def cross_field_problems(cls, data: dict) -> list[tuple[Loc, str]]:
        base_url, path = cls.valid_alone(data, "base_url"), cls.valid_alone(data, "path")
        if not base_url:
            return []
        return [((key,), why) for key, why in url_problems(base_url, path or cls.model_fields["path"].default)]


class RetrievalSettings(Section):
    level: Literal["chunk", "doc"] = "chunk"  # doc: BEIR-comparable, each document's best chunk
    folder_filter: StrictBool = False  # search each question only under its `folders` (seed 002); adds scope_miss_rate
    bm25: Bm25Settings = Bm25Settings()
    dense: DenseSettings = DenseSettings()
    hybrid: HybridSettings = HybridSettings()
    http: HttpSettings = HttpSettings()


def _each_kind_once(kinds: tuple[str, ...]) -> tuple[str, ...]:
    if not kinds or len(set(kinds)) != len(kinds):
        raise problem("must be a non-empty list without duplicates")
    return kinds


# The kinds a run evaluates, in the order written.
Retrievers = Annotated[tuple[RetrieverKind, ...], AfterValidator(_each_kind_once)]
