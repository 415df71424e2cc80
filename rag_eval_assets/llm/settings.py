"""How to reach one OpenAI-compatible chat endpoint, and what its tokens cost.

The API key itself is never part of the settings: `api_key_env` only names the environment variable the
caller reads it from, so settings can be logged, hashed and stored in run configs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.settings_base import Section, above, at_least, between, problem

SchemaMode = Literal["json_object_schema", "json_schema"]
NO_LLM = "not computed: no llm endpoint configured (rag_eval.yaml: llm.base_url, llm.model)"
# The roles that call an LLM, each with the section that may name its own endpoint (`<section>.llm`); the
# top-level `llm` serves every role that names none.
ROLES = {"answerer": "answering", "judge": "judge", "query_generation": "query_generation", "ragas": "ragas"}


def _http_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise problem(f"must start with http:// or https://, got {redact_url(url)!r}")
    return url


def _named(model: str) -> str:
    if not model:
        raise problem("model is empty")
    return model


def _not_negative(prices: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    negative = [f"price_per_1k[{model!r}] must be (prompt, completion) >= 0, got {price!r}"
                for model, price in prices.items() if min(price) < 0]
    if negative:
        raise problem("; ".join(negative))
    return prices


class LLMSettings(Section):
    base_url: Annotated[StrictStr, AfterValidator(_http_url)]  # up to and including /v1, e.g. http://127.0.0.1:8080/v1
    model: Annotated[StrictStr, AfterValidator(_named)]
    api_key_env: StrictStr | None = None
    headers_env: StrictStr | None = None  # a variable holding a JSON object of request headers (credentials.py)
    temperature: Annotated[StrictFloat, at_least(0)] = 0.0
    seed: StrictInt = 0
    max_tokens: Annotated[StrictInt, at_least(1)] = 512
    connect_timeout: Annotated[StrictFloat, above(0)] = 5.0
    read_timeout: Annotated[StrictFloat, above(0)] = 120.0
    max_concurrency: Annotated[StrictInt, at_least(1)] = 2
    # a larger share of failed calls per cell fails the blocking call_health check
    max_error_rate: Annotated[StrictFloat, between(0, 1)] = 0.05
    schema_mode: SchemaMode = "json_object_schema"
    # model -> (prompt, completion) USD per 1,000 tokens
    price_per_1k: Annotated[dict[StrictStr, tuple[StrictFloat, StrictFloat]], AfterValidator(_not_negative)] = Field(
        default_factory=dict)
    retry: RetryPolicy = RetryPolicy()

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    @property
    def price(self) -> tuple[float, float] | None:
        """(prompt, completion) USD per 1k tokens of the configured model; None when the table lacks it."""
        return self.price_per_1k.get(self.model)
