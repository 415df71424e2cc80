"""What a batch of calls will cost, printed before a run spends anything.

Tokens are estimated as characters / 4, the usual rule of thumb for English with BPE tokenizers; the
estimate is a guide for the order of magnitude, not a bill.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.llm.usage import cost_usd

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
PROMPT_OVERHEAD_TOKENS = 200  # the instructions around the inserted texts of an answer or judge prompt
JUDGE_REPLY_TOKENS = 200
NO_CALLS = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}


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


def answering_estimate(prompts: Sequence[Sequence[str]], settings: LLMSettings) -> dict[str, float]:
    """The cost of answering: one call per prompt, each given as the texts it inserts (the question, then its
    contexts), at most llm.max_tokens back."""
    tokens = [sum(estimate_tokens(t) for t in texts) + PROMPT_OVERHEAD_TOKENS for texts in prompts]
    return estimate_cost(len(tokens), sum(tokens) / max(len(tokens), 1), settings.max_tokens, settings)


def judging_estimate(answers: Sequence[str], contexts: Sequence[str], n_judges: int,
                     settings: LLMSettings) -> dict[str, float]:
    """The cost of judging: `n_judges` calls per answer, each reading the answer and its contexts (JSON)."""
    texts = [a + c for a, c in zip(answers, contexts)]
    mean = sum(estimate_tokens(t) for t in texts) / max(len(texts), 1) + PROMPT_OVERHEAD_TOKENS
    return estimate_cost(len(answers) * n_judges, mean, JUDGE_REPLY_TOKENS, settings)
