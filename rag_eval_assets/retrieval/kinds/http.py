"""`kind: http`: a system under test behind seed 002's `/api/v1/ask?debug=true` contract (retrieval/http_sut.py).
It brings its own chunks and answers: one call per question at the largest k, from which its retrieval results and
its answers for every k are read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, ClassVar

from pydantic import BaseModel, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.credentials import CredentialError, bearer_key, headers_from_env
from rag_eval_assets.errors import InputError
from rag_eval_assets.http_retry import HttpCallError, RetryPolicy
from rag_eval_assets.retrieval.http_sut import HttpSutClient, HttpSutConfig, SutResponse
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.sut_url import url_problems
from rag_eval_assets.settings_base import Loc, Section, above, at_least


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


class HttpKind:
    name: ClassVar[str] = "http"
    Params: ClassVar[type[BaseModel]] = HttpSettings
    own_answers: ClassVar[bool] = True
    role: ClassVar[str | None] = None

    def problems(self, params: HttpSettings) -> list[tuple[str, str]]:
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


def client_for(http: HttpSettings, base_url: str | None = None,
               setting: Callable[[str], str] = "retrieval.http.{}".format) -> HttpSutClient:
    """The client of `retrieval.http` (its key and headers from the environment variables it names, its timeouts
    and retries), at `base_url` when given instead of the configured one; `setting` as in request_headers."""
    return HttpSutClient(
        HttpSutConfig(
            base_url=base_url or http.base_url,
            path=http.path,
            headers=request_headers(http, setting),
            connect_timeout=http.connect_timeout,
            read_timeout=http.read_timeout,
            retry=RetryPolicy(max_attempts=http.max_attempts),
        )
    )


def request_headers(http: HttpSettings, setting: Callable[[str], str] = "retrieval.http.{}".format) -> dict[str, str]:
    """The headers of `headers_env` plus the bearer key of `api_key_env`. `setting(field)` is the dotted key the
    field was written under (a variant may set its own), for the CredentialError naming a missing or unusable
    variable."""
    headers = headers_from_env(http.headers_env, setting("headers_env"))
    if http.api_key_env:
        key = bearer_key(http.api_key_env, setting("api_key_env"))
        if any(name.lower() == "authorization" for name in headers):
            raise CredentialError(setting("headers_env"), str(http.headers_env),
                                  f"which sets Authorization, which {setting('api_key_env')} also sets; keep one")
        headers["Authorization"] = f"Bearer {key}"
    return headers
