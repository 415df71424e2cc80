"""What the LLM client sends, what it records, and what it refuses, against a loopback chat server."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm import LLMCache, LLMClient, LLMSettings
from rag_eval_assets_tests.llm_fault_server import Reply, Status, llm_fault_server

SCHEMA = {
    "title": "judge verdict",
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 5}},
    "required": ["score"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Rate it."}]
SECRET = "sk-test-5f1d2c0a9e"


def _settings(base_url: str, **overrides) -> LLMSettings:
    return LLMSettings(base_url=base_url, model="judge-1", retry=RetryPolicy(max_attempts=2, base_delay=0.0),
                       **overrides)


def test_a_plain_request_carries_the_fixed_sampling_settings_and_the_key():
    with llm_fault_server([Reply("Fine.")]) as server:
        with LLMClient(_settings(server.base_url, seed=42, max_tokens=64), api_key=SECRET) as client:
            call = client.chat(MESSAGES, prompt_version="v1", params={"top_p": 1.0, "stop": ["\n\n"]})
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {SECRET}"
    assert request.body == {"model": "judge-1", "messages": MESSAGES, "temperature": 0.0, "seed": 42,
                            "max_tokens": 64, "top_p": 1.0, "stop": ["\n\n"]}
    assert (call.content, call.data, call.model, call.cached, call.attempts) == ("Fine.", None, "judge-1", False, 1)


def test_json_object_schema_mode_sends_the_schema_inside_json_object():
    with llm_fault_server([Reply('{"score": 4}')]) as server:
        with LLMClient(_settings(server.base_url)) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=SCHEMA)
    assert server.bodies[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert call.data == {"score": 4}


def test_json_schema_mode_sends_the_openai_form_with_a_valid_name():
    with llm_fault_server([Reply('{"score": 4}')]) as server:
        with LLMClient(_settings(server.base_url, schema_mode="json_schema")) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=SCHEMA)
    assert server.bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "judge_verdict", "schema": SCHEMA, "strict": True},
    }
    assert call.data == {"score": 4}


def test_a_schema_constraint_beyond_types_is_enforced():
    with llm_fault_server([Reply('{"score": 9}'), Reply('{"score": 5}')]) as server:
        with LLMClient(_settings(server.base_url)) as client:
            call = client.chat(MESSAGES, prompt_version="v1", schema=SCHEMA)
    assert call.data == {"score": 5} and call.attempts == 2
    assert "$.score: 9 is greater than the maximum of 5" in server.bodies[1]["messages"][-1]["content"]


def test_the_key_stays_out_of_repr_errors_and_the_cache(tmp_path):
    with llm_fault_server([Status(401), Reply("Fine.")]) as server:
        with LLMCache(tmp_path / "c.sqlite") as cache, LLMClient(_settings(server.base_url), cache, SECRET) as client:
            failed = client.chat(MESSAGES, prompt_version="v1")
            ok = client.chat(MESSAGES, prompt_version="v1")
            assert SECRET not in repr(client) and SECRET not in repr(client.settings)
    assert failed.error is not None and SECRET not in failed.error
    assert ok.error is None
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir())


def test_cost_follows_the_price_table_and_an_unknown_model_is_flagged():
    with llm_fault_server([Reply("a", 1000, 500), Reply("b", 1000, 500)]) as server:
        priced = LLMClient(_settings(server.base_url, price_per_1k={"judge-1": (0.5, 1.5)}))
        unpriced = LLMClient(_settings(server.base_url, price_per_1k={"other": (0.5, 1.5)}))
        with priced, unpriced:
            a = priced.chat(MESSAGES, prompt_version="v1")
            b = unpriced.chat(MESSAGES, prompt_version="v1")
            assert priced.usage()["cost_usd"] == 1.25 and priced.usage()["unpriced_calls"] == 0
            assert unpriced.usage()["cost_usd"] == 0.0 and unpriced.usage()["unpriced_calls"] == 1
    assert (a.cost_usd, a.priced) == (1.25, True)
    assert (b.cost_usd, b.priced, b.prompt_tokens) == (0.0, False, 1000)


def test_chat_many_keeps_order_and_never_exceeds_max_concurrency():
    requests = [{"messages": [{"role": "user", "content": f"question {i}"}], "prompt_version": "v1"}
                for i in range(8)]
    with llm_fault_server(delay_s=0.15) as server:
        with LLMClient(_settings(server.base_url, max_concurrency=3)) as client:
            calls = client.chat_many(requests)
            usage = client.usage()
    assert [c.content for c in calls] == [f"echo: question {i}" for i in range(8)]
    assert server.max_in_flight == 3
    assert usage["calls"] == 8 and usage["requests"] == 8 and usage["prompt_tokens"] == 88


def test_the_concurrency_bound_holds_across_threads_sharing_a_client():
    with llm_fault_server(delay_s=0.1) as server:
        with LLMClient(_settings(server.base_url, max_concurrency=2)) as client:
            with ThreadPoolExecutor(6) as pool:
                list(pool.map(lambda i: client.chat([{"role": "user", "content": str(i)}], prompt_version="v1"),
                              range(6)))
    assert server.max_in_flight == 2


def test_configuration_mistakes_raise_before_anything_is_sent():
    with llm_fault_server() as server:
        with LLMClient(_settings(server.base_url)) as client:
            with pytest.raises(ValueError, match="params must not set \\['seed', 'temperature'\\]"):
                client.chat(MESSAGES, prompt_version="v1", params={"temperature": 1.0, "seed": 3})
            with pytest.raises(ValueError, match="invalid JSON Schema"):
                client.chat(MESSAGES, prompt_version="v1", schema={"type": "object", "required": "score"})
            with pytest.raises(ValueError, match="\"type\": \"object\""):
                client.chat(MESSAGES, prompt_version="v1", schema={"type": "array"})
            with pytest.raises(ValueError, match=r"messages\[1\]\.content must be a string"):
                client.chat([MESSAGES[0], {"role": "user", "content": None}], prompt_version="v1")
            with pytest.raises(ValueError, match="non-empty list"):
                client.chat([], prompt_version="v1")
            with pytest.raises(ValueError, match="prompt_version is empty"):
                client.chat(MESSAGES, prompt_version="")
            with pytest.raises(ValueError, match=r"chat_many request 1: unknown keys \['schemas'\]"):
                client.chat_many([{"messages": MESSAGES, "prompt_version": "v1"},
                                  {"messages": MESSAGES, "prompt_version": "v1", "schemas": SCHEMA}])
        assert server.requests == []


def test_settings_reject_nonsense_listing_every_problem():
    with pytest.raises(ValueError) as raised:
        LLMSettings(base_url="localhost:8080", model="", temperature=-1, max_concurrency=0,
                    schema_mode="grammar", price_per_1k={"m": (-1.0, 1.0)})
    message = str(raised.value)
    for fragment in ("base_url", "model is empty", "temperature", "max_concurrency", "schema_mode",
                     "price_per_1k['m']"):
        assert fragment in message


def test_settings_name_the_endpoint_and_price():
    s = LLMSettings(base_url="http://127.0.0.1:8080/v1/", model="m", price_per_1k={"m": (0.1, 0.2)})
    assert s.chat_url == "http://127.0.0.1:8080/v1/chat/completions"
    assert s.price == (0.1, 0.2)
    assert LLMSettings(base_url="https://api.example/v1", model="x").price is None


def test_empty_chat_many_sends_nothing():
    with LLMClient(_settings("http://127.0.0.1:9/v1"), rng=random.Random(0)) as client:
        assert client.chat_many([]) == []
