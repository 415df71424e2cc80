"""What a batch of calls will cost, printed before a run spends anything.

Tokens are estimated as characters / 4, the usual rule of thumb for English with BPE tokenizers; the
estimate is a guide for the order of magnitude, not a bill.
"""

from __future__ import annotations

import logging
import math

from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.llm.usage import cost_usd

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_messages_tokens(messages: list[dict[str, str]]) -> int:
    return sum(estimate_tokens(m["content"]) for m in messages)


def estimate_cost(
    n_calls: int, mean_prompt_tokens: float, mean_completion_tokens: float, settings: LLMSettings
) -> dict[str, float]:
    """calls, prompt_tokens, completion_tokens and cost_usd of `n_calls` such calls (0.0 when the configured
    model has no price: `settings.price` is then None)."""
    if n_calls < 0 or mean_prompt_tokens < 0 or mean_completion_tokens < 0:
        raise ValueError(f"counts must be >= 0, got {n_calls}, {mean_prompt_tokens}, {mean_completion_tokens}")
    prompt_tokens = round(n_calls * mean_prompt_tokens)
    completion_tokens = round(n_calls * mean_completion_tokens)
    if settings.price is None and n_calls:
        logger.warning("model %r has no entry in price_per_1k: its cost is estimated as 0.0", settings.model)
    return {
        "calls": n_calls,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": cost_usd(prompt_tokens, completion_tokens, settings.price),
    }
