"""`kind: http`: a system under test behind seed 002's `/api/v1/ask?debug=true` contract (retrieval/http_sut.py).
It brings its own chunks and answers: one call per question at the largest k, from which its retrieval results and
its answers for every k are read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

from pydantic import BaseModel, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.errors import InputError
from rag_eval_assets.http_retry import HttpCallError
from rag_eval_assets.retrieval.http_sut import SutResponse, client_for, request_headers
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.sut_url import url_problems
from rag_eval_assets.settings_base import Loc, Section, above, at_least


class HttpParams(Section):
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


class HttpKind:
    name: ClassVar[str] = "http"
    Params: ClassVar[type[BaseModel]] = HttpParams
    own_answers: ClassVar[bool] = True
    score_column: ClassVar[str | None] = None

    def problems(self, params: HttpParams) -> list[tuple[str, str]]:
        return [] if params.base_url else [("base_url", "required when the http retriever is listed")]

    def check_environment(self, variant: Variant) -> None:
        request_headers(variant.params, variant.setting)

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return []

    def build(self, variant: Variant, indexes: BuiltIndexes):
        raise TypeError(f"{variant.name} is a service under test: its results come from its own responses")

    def respond(self, variant: Variant, texts: Sequence[str], depth: int,
                folders: Sequence[Sequence[str]] | None) -> list[SutResponse | Exception]:
        out: list[SutResponse | Exception] = []
        with client_for(variant.params, setting=variant.setting) as client:
            for i, text in enumerate(texts):
                try:
                    out.append(client.ask(text, depth, list(folders[i]) if folders is not None else None))
                except (HttpCallError, InputError, ValueError) as exc:
                    out.append(exc)
        return out


KIND = HttpKind()
