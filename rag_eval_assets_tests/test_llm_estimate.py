from __future__ import annotations

import pytest

from rag_eval_assets.llm import LLMSettings, estimate_cost, estimate_messages_tokens, estimate_tokens


def test_tokens_are_estimated_as_characters_over_four_rounded_up():
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde", "x" * 4000)] == [0, 1, 1, 2, 1000]
    messages = [{"role": "system", "content": "x" * 10}, {"role": "user", "content": "y" * 8}]
    assert estimate_messages_tokens(messages) == 3 + 2


def test_estimate_prices_the_configured_model():
    settings = LLMSettings(base_url="https://api.example/v1", model="m", price_per_1k={"m": (0.5, 1.5)})
    assert estimate_cost(200, 1200.0, 150.5, settings) == {
        "calls": 200, "prompt_tokens": 240_000, "completion_tokens": 30_100, "cost_usd": 120.0 + 45.15,
    }


def test_an_unpriced_model_is_estimated_at_zero_and_warned_about(caplog):
    settings = LLMSettings(base_url="http://127.0.0.1:8080/v1", model="local")
    with caplog.at_level("WARNING"):
        estimate = estimate_cost(10, 100, 10, settings)
    assert estimate == {"calls": 10, "prompt_tokens": 1000, "completion_tokens": 100, "cost_usd": 0.0}
    assert "'local' has no entry in price_per_1k" in caplog.text


def test_negative_counts_are_refused():
    with pytest.raises(ValueError):
        estimate_cost(-1, 10, 10, LLMSettings(base_url="http://h/v1", model="m"))
