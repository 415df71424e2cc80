"""The LLM layer: one OpenAI-compatible client with retries, structured replies, a SQLite reply cache,
usage and cost accounting, and versioned prompts. Plain Python: no dagster import."""

from __future__ import annotations

from rag_eval_assets.llm.cache import DEFAULT_CACHE_FILENAME, CachedReply, LLMCache, cache_key
from rag_eval_assets.llm.client import LLMCall, LLMClient
from rag_eval_assets.llm.estimate import estimate_cost, estimate_messages_tokens, estimate_tokens
from rag_eval_assets.llm.prompts import Prompt
from rag_eval_assets.llm.settings import LLMSettings, SchemaMode

__all__ = [
    "DEFAULT_CACHE_FILENAME",
    "CachedReply",
    "LLMCache",
    "LLMCall",
    "LLMClient",
    "LLMSettings",
    "Prompt",
    "SchemaMode",
    "cache_key",
    "estimate_cost",
    "estimate_messages_tokens",
    "estimate_tokens",
]
