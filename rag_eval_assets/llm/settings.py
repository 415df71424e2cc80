"""How to reach one OpenAI-compatible chat endpoint, and what its tokens cost.

The API key itself is never part of the settings: `api_key_env` only names the environment variable the
caller reads it from, so settings can be logged, hashed and stored in run configs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.redaction import redact_url

SchemaMode = Literal["json_object_schema", "json_schema"]
SCHEMA_MODES: tuple[str, ...] = ("json_object_schema", "json_schema")


@dataclass(frozen=True)
class LLMSettings:
    base_url: str  # up to and including /v1, e.g. http://127.0.0.1:8080/v1
    model: str
    api_key_env: str | None = None
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 512
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    max_concurrency: int = 2
    max_error_rate: float = 0.05  # a larger share of failed calls per cell fails the blocking llm_health check
    schema_mode: SchemaMode = "json_object_schema"
    # model -> (prompt, completion) USD per 1,000 tokens
    price_per_1k: dict[str, tuple[float, float]] = field(default_factory=dict)
    retry: RetryPolicy = RetryPolicy()

    def __post_init__(self) -> None:
        problems = []
        if not self.base_url.startswith(("http://", "https://")):
            problems.append(f"base_url must start with http:// or https://, got {redact_url(self.base_url)!r}")
        if not self.model:
            problems.append("model is empty")
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0, got {self.temperature}")
        if self.max_tokens < 1:
            problems.append(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            problems.append(f"timeouts must be > 0, got connect={self.connect_timeout} read={self.read_timeout}")
        if self.max_concurrency < 1:
            problems.append(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if not 0 <= self.max_error_rate <= 1:
            problems.append(f"max_error_rate must be between 0 and 1, got {self.max_error_rate}")
        if self.schema_mode not in SCHEMA_MODES:
            problems.append(f"schema_mode must be one of {SCHEMA_MODES}, got {self.schema_mode!r}")
        for model, price in self.price_per_1k.items():
            if len(price) != 2 or any(p < 0 for p in price):
                problems.append(f"price_per_1k[{model!r}] must be (prompt, completion) >= 0, got {price!r}")
        if problems:
            raise ValueError("invalid LLM settings: " + "; ".join(problems))

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    @property
    def price(self) -> tuple[float, float] | None:
        """(prompt, completion) USD per 1k tokens of the configured model; None when the table lacks it."""
        return self.price_per_1k.get(self.model)
