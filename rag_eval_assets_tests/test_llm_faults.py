"""The LLM client against a scripted loopback server: every fault ends in a reply or an explicit error."""

from __future__ import annotations

import json
import random

from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm import LLMCache, LLMClient, LLMSettings
from rag_eval_assets_tests.llm_fault_server import Reply, Status, llm_fault_server
from rag_eval_assets_tests.sut_server import unused_port

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def _client(base_url: str, delays: list[float], *, cache: LLMCache | None = None, **overrides) -> LLMClient:
    settings = LLMSettings(
        base_url=base_url,
        model="test-model",
        price_per_1k={"test-model": (1.0, 2.0)},
        retry=RetryPolicy(max_attempts=4, base_delay=0.1, max_delay=5.0, jitter=False),
        **overrides,
    )
    return LLMClient(settings, cache, sleep=delays.append, rng=random.Random(0))


def test_429_waits_what_retry_after_asks_then_succeeds():
    delays: list[float] = []
    with llm_fault_server([Status(429, retry_after="2"), Reply("Paris")]) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1")
            usage = client.usage()
    assert len(server.requests) == 2
    assert delays == [2.0]  # Retry-After, not the 0.1 s backoff
    assert (call.content, call.error, call.attempts) == ("Paris", None, 2)
    assert (call.prompt_tokens, call.completion_tokens) == (11, 7)
    assert call.cost_usd == 11 / 1000 * 1.0 + 7 / 1000 * 2.0
    assert usage["requests"] == 2 and usage["prompt_tokens"] == 11 and usage["errors"] == 0


def test_500_then_success_backs_off_once():
    delays: list[float] = []
    with llm_fault_server([Status(500), Reply("Paris")]) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1")
    assert len(server.requests) == 2
    assert delays == [0.1]
    assert (call.content, call.attempts, call.error) == ("Paris", 2, None)


def test_a_reply_slower_than_the_read_timeout_is_abandoned_and_retried():
    delays: list[float] = []
    with llm_fault_server(["hang", Reply("Paris")], hang_s=5.0) as server:
        with _client(server.base_url, delays, read_timeout=0.3) as client:
            call = client.chat(MESSAGES, prompt_version="v1")
    assert len(server.requests) == 2
    assert delays == [0.1]
    assert (call.content, call.attempts, call.error) == ("Paris", 2, None)
    assert call.latency_s < 3.0  # gave up on the hang at the read timeout, not when the server let go


def test_a_dropped_connection_is_retried():
    delays: list[float] = []
    with llm_fault_server(["drop", Reply("Paris")]) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1")
    assert len(server.requests) == 2
    assert (call.content, call.attempts) == ("Paris", 2)


def test_a_truncated_body_is_an_error_that_is_not_cached(tmp_path):
    delays: list[float] = []
    with llm_fault_server(["truncated"]) as server, LLMCache(tmp_path / "c.sqlite") as cache:
        with _client(server.base_url, delays, cache=cache) as client:
            broken = client.chat(MESSAGES, prompt_version="v1")
            assert len(server.requests) == 1
            healed = client.chat(MESSAGES, prompt_version="v1")
            usage = client.usage()
        assert len(server.requests) == 2
        assert len(cache) == 1
    assert broken.data is None and broken.content == "" and not broken.cached
    assert "response body is not JSON" in broken.error
    assert (broken.prompt_tokens, broken.completion_tokens, broken.cost_usd) == (0, 0, 0.0)
    assert healed.error is None and healed.content == "echo: What is the capital of France?"
    assert usage["errors"] == 1 and usage["requests"] == 2


def test_a_reply_of_the_wrong_shape_is_repaired_by_one_more_request():
    delays: list[float] = []
    script = [Reply('{"reply": "Paris"}', 20, 5), Reply('{"answer": "Paris"}', 40, 6)]
    with llm_fault_server(script) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=ANSWER_SCHEMA)
            usage = client.usage()
    assert len(server.requests) == 2
    assert call.data == {"answer": "Paris"} and call.error is None and call.attempts == 2
    assert (call.prompt_tokens, call.completion_tokens) == (60, 11)  # both requests are paid for
    assert usage["prompt_tokens"] == 60 and usage["completion_tokens"] == 11
    repair = server.bodies[1]["messages"]
    assert repair[:-2] == MESSAGES
    assert repair[-2] == {"role": "assistant", "content": '{"reply": "Paris"}'}
    assert "'answer' is a required property" in repair[-1]["content"]
    assert repair[-1]["role"] == "user"
    assert server.bodies[1]["response_format"] == server.bodies[0]["response_format"]


def test_a_reply_that_is_not_json_at_all_is_repaired_too():
    delays: list[float] = []
    with llm_fault_server([Reply("The answer is Paris."), Reply('{"answer": "Paris"}')]) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=ANSWER_SCHEMA)
    assert call.data == {"answer": "Paris"}
    assert "not valid JSON" in server.bodies[1]["messages"][-1]["content"]


def test_two_invalid_replies_end_in_an_error_not_an_exception(tmp_path):
    delays: list[float] = []
    script = [Reply('{"answer": 3}'), Reply('{"answer": ["Paris"]}')]
    with llm_fault_server(script) as server, LLMCache(tmp_path / "c.sqlite") as cache:
        with _client(server.base_url, delays, cache=cache) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=ANSWER_SCHEMA)
            usage = client.usage()
        assert len(cache) == 0  # a failed call is tried again on the next run
    assert len(server.requests) == 2  # exactly one repair request
    assert call.data is None
    assert call.error == ("the reply does not match the schema after one repair request: "
                          "$.answer: ['Paris'] is not of type 'string'")
    assert call.content == '{"answer": ["Paris"]}'
    assert (call.prompt_tokens, call.completion_tokens) == (22, 14)
    assert usage["errors"] == 1 and usage["requests"] == 2


def test_a_reply_cut_at_max_tokens_says_so():
    delays: list[float] = []
    script = [Reply('{"answer": "Par', finish_reason="length")] * 2
    with llm_fault_server(script) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=ANSWER_SCHEMA)
    assert call.data is None and call.error.endswith("(the reply was cut off at max_tokens)")


def test_connection_refused_is_an_error_after_max_attempts():
    delays: list[float] = []
    with _client(f"http://127.0.0.1:{unused_port()}/v1", delays) as client:
        call = client.chat(MESSAGES, prompt_version="v1", schema=ANSWER_SCHEMA)
        usage = client.usage()
    assert call.data is None and call.content == ""
    assert call.attempts == 4 and delays == [0.1, 0.2, 0.4]
    assert "failed after 4 attempt(s)" in call.error and "ConnectError" in call.error
    assert usage["errors"] == 1 and usage["requests"] == 4 and usage["cost_usd"] == 0.0


def test_a_non_retryable_status_fails_at_once_with_the_body_excerpt():
    delays: list[float] = []
    with llm_fault_server([Status(400)]) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1")
    assert len(server.requests) == 1 and delays == []
    assert "status 400" in call.error and "scripted 400" in call.error


def test_a_reply_without_usage_counts_zero_tokens_and_is_flagged():
    delays: list[float] = []
    with llm_fault_server([Reply("Paris", usage=False)]) as server:
        with _client(server.base_url, delays) as client:
            call = client.chat(MESSAGES, prompt_version="v1")
            usage = client.usage()
    assert (call.content, call.prompt_tokens, call.completion_tokens) == ("Paris", 0, 0)
    assert usage["missing_usage"] == 1


def test_failed_calls_in_a_batch_do_not_stop_the_others():
    delays: list[float] = []
    script = [Reply('{"answer": 1}'), Reply('{"answer": 2}')]  # the first request and its repair
    with llm_fault_server(script, responder=lambda body: Reply(json.dumps({"answer": "ok"}))) as server:
        with _client(server.base_url, delays, max_concurrency=1) as client:
            calls = client.chat_many(
                [{"messages": [{"role": "user", "content": f"q{i}"}], "prompt_version": "v1",
                  "schema": ANSWER_SCHEMA} for i in range(3)]
            )
    assert [c.error is None for c in calls] == [False, True, True]
    assert [c.data for c in calls] == [None, {"answer": "ok"}, {"answer": "ok"}]
    assert len(server.requests) == 4
