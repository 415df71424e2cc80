"""`kind: http`: a system under test behind seed 002's `/api/v1/ask?debug=true` contract (retrieval/http_sut.py).
It brings its own chunks and answers: one call per question at the largest k, from which its retrieval results and
its answers for every k are read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from rag_eval_assets.errors import InputError
from rag_eval_assets.http_retry import HttpCallError
from rag_eval_assets.retrieval.http_sut import SutResponse, client_for
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.sut_url import url_problems


class HttpParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    base_url: str = ""
    path: str = "/api/v1/ask"
    api_key_env: str | None = None  # name of the environment variable holding the key; the key is never stored
    # name of the environment variable holding a JSON object of extra request headers (they may carry secrets)
    headers_env: str | None = None
    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(120.0, gt=0)
    max_attempts: int = Field(5, ge=1)


class HttpKind:
    name: ClassVar[str] = "http"
    Params: ClassVar[type[BaseModel]] = HttpParams
    own_answers: ClassVar[bool] = True
    score_column: ClassVar[str | None] = None

    def problems(self, params: HttpParams) -> list[tuple[str, str]]:
        if not params.base_url:
            return [("base_url", "required for an http retriever")]
        return url_problems(params.base_url, params.path)

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return []

    def build(self, variant: Variant, indexes: BuiltIndexes):
        raise TypeError(f"{variant.name} is a service under test: its results come from its own responses")

    def respond(self, variant: Variant, texts: Sequence[str], depth: int,
                folders: Sequence[Sequence[str]] | None) -> list[SutResponse | Exception]:
        out: list[SutResponse | Exception] = []
        with client_for(variant.params) as client:
            for i, text in enumerate(texts):
                try:
                    out.append(client.ask(text, depth, list(folders[i]) if folders is not None else None))
                except (HttpCallError, InputError, ValueError) as exc:
                    out.append(exc)
        return out


KIND = HttpKind()
