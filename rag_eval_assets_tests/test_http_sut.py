from __future__ import annotations

import json
import logging
import math
import random

import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.http_retry import HttpCallError, RetryPolicy
from rag_eval_assets.retrieval.http_sut import (
    SUT_RESULT_COLUMNS,
    HttpSutClient,
    HttpSutConfig,
    SutChunk,
    parse_sut_response,
    sut_results_frame,
)
from rag_eval_assets.retrieval.kinds.http import HttpSettings
from rag_eval_assets.retrieval.kinds.http import client_for
from rag_eval_assets_tests.sut_server import CorpusChunk, chunk_id_of, sut_server, unused_port

GO = CorpusChunk(
    "Software/LeetCode Tips.md",
    "# Golang Tips & Oddities",
    "Go has no built in string sort. A single element in a string is a byte.",
)
PY = CorpusChunk("Software/LeetCode Tips.md", "# Python Tips", "Use heapq for priority queues. Sorting is stable.")
RUN = CorpusChunk("Health/Running.md", "# Training > ## Long runs", "Long runs build aerobic base. Keep the pace easy.")
SLEEP = CorpusChunk("Health/Sleep.md", "", "Sleep eight hours before a race day.")
CORPUS = [GO, PY, RUN, SLEEP]
VAULT = "test-vault"
FAST = RetryPolicy(max_attempts=3, base_delay=0.25, jitter=False)


def _client(url: str, delays: list[float] | None = None, **overrides) -> HttpSutClient:
    config = HttpSutConfig(base_url=url, retry=overrides.pop("retry", FAST), **overrides)
    recorder = delays.append if delays is not None else _no_sleep
    return HttpSutClient(config, sleep=recorder, rng=random.Random(0))


def _no_sleep(_: float) -> None:
    pass


def test_ask_returns_answer_references_and_ranked_chunks_with_all_fields():
    with sut_server(CORPUS) as server, _client(server.url) as client:
        response = client.ask("Golang string sort?", k=3)
    assert response.answer == "Go has no built in string sort."
    assert response.abstained is False
    assert response.abstain_reason is None
    assert response.references == [
        {"chunk_id": chunk_id_of(VAULT, GO), "rel_path": GO.rel_path, "heading_path": GO.heading_path}
    ]
    assert [c.rank for c in response.chunks] == [1, 2, 3]
    # "string" and "sort" of the question's three terms occur; "string" twice among the chunk's 9 distinct terms:
    # cosine = (2 + 1) / (sqrt(3) * sqrt(12)) = 0.5, overlap = 2/3, final = 0.4 * 0.5 + 0.6 * 2/3 = 0.6.
    assert response.chunks[0] == SutChunk(
        chunk_id=chunk_id_of(VAULT, GO),
        rel_path=GO.rel_path,
        heading_path=GO.heading_path,
        score_vector=pytest.approx(0.5),
        score_lexical=pytest.approx(2 / 3),
        score_final=pytest.approx(0.6),
        text=GO.text,
        rank=1,
    )
    # No other chunk shares a term, so ties keep corpus order.
    assert [c.chunk_id for c in response.chunks[1:]] == [chunk_id_of(VAULT, PY), chunk_id_of(VAULT, RUN)]
    assert [c.score_final for c in response.chunks[1:]] == [0.0, 0.0]
    assert response.attempts == 1
    assert response.latency_s > 0
    assert response.folder_selection is None
    assert response.raw["answer"] == response.answer


def test_debug_flag_body_fields_and_headers_are_sent():
    secret = "Bearer sk-test-0123456789"
    with sut_server(CORPUS, question_field="query", k_field="top_k") as server:
        config = HttpSutConfig(
            base_url=server.url + "/",
            question_field="query",
            k_field="top_k",
            extra_body={"folder_mode": "on_with_fallback"},
            headers={"Authorization": secret},
            retry=FAST,
        )
        with HttpSutClient(config) as client:
            response = client.ask("long runs pace", k=2, folders=["Health"])
        [request] = server.requests
    assert request.method == "POST"
    assert request.path == "/api/v1/ask"
    assert request.query == {"debug": ["true"]}
    assert request.body == {
        "folder_mode": "on_with_fallback", "query": "long runs pace", "top_k": 2, "folders": ["Health"]
    }
    assert request.headers["Authorization"] == secret
    assert secret not in repr(config)
    assert [c.chunk_id for c in response.chunks] == [chunk_id_of(VAULT, RUN), chunk_id_of(VAULT, SLEEP)]
    assert response.folder_selection == {"folders": ["Health"], "reasoning": "requested by caller"}


def test_base_url_query_and_path_prefix_are_kept_beside_debug():
    with sut_server(CORPUS, path="/tenant-a/api/v1/ask") as server:
        with _client(server.url + "/tenant-a/?token=t%2F0k&lang=en") as client:
            response = client.ask("string sort", k=1)
        [request] = server.requests
    assert request.path == "/tenant-a/api/v1/ask"
    assert request.query == {"token": ["t/0k"], "lang": ["en"], "debug": ["true"]}
    assert response.chunks[0].chunk_id == chunk_id_of(VAULT, GO)


def test_errors_mask_the_base_url_query():
    with sut_server(CORPUS) as server, _client(server.url + "?token=s3cret", path="/api/v2/ask") as client:
        with pytest.raises(HttpCallError) as info:
            client.ask("string sort", k=1)
        assert server.requests[0].query["token"] == ["s3cret"]
    assert str(info.value).startswith(f"POST {server.url}/api/v2/ask?token=***&debug=true failed after 1 attempt")
    assert "s3cret" not in str(info.value)


def _auth_settings(url: str, **overrides) -> HttpSettings:
    return HttpSettings(base_url=url, max_attempts=1, **overrides)


def test_client_for_sends_the_bearer_key_and_the_headers_of_headers_env(monkeypatch):
    required = {"Authorization": "Bearer sk-sut-1", "X-Tenant": "acme"}
    monkeypatch.setenv("SUT_KEY", "sk-sut-1")
    monkeypatch.setenv("SUT_HEADERS", json.dumps({"X-Tenant": "acme"}))
    with sut_server(CORPUS, required_headers=required) as server:
        with client_for(_auth_settings(server.url, api_key_env="SUT_KEY", headers_env="SUT_HEADERS")) as client:
            response = client.ask("string sort", k=1)
        # Without the tenant header the service refuses, and a 401 is not retried.
        with client_for(_auth_settings(server.url, api_key_env="SUT_KEY")) as client:
            with pytest.raises(HttpCallError) as info:
                client.ask("string sort", k=1)
        # The whole Authorization header may come from headers_env instead.
        monkeypatch.setenv("SUT_HEADERS", json.dumps(required))
        with client_for(_auth_settings(server.url, headers_env="SUT_HEADERS")) as client:
            again = client.ask("string sort", k=1)
        sent = [(r.headers.get("Authorization"), r.headers.get("X-Tenant")) for r in server.requests]
    assert response.answer == again.answer == "Go has no built in string sort."
    assert info.value.last_status == 401 and len(info.value.attempts) == 1
    assert sent == [("Bearer sk-sut-1", "acme"), ("Bearer sk-sut-1", None), ("Bearer sk-sut-1", "acme")]


@pytest.mark.parametrize(
    "value, message",
    [
        (None, "retrieval.http.headers_env names SUT_HEADERS, which is not set in the environment"),
        ('{"X-Tenant": "acme-secret"', "retrieval.http.headers_env names SUT_HEADERS, which is not valid JSON (line 1"),
        ('["acme-secret"]', "retrieval.http.headers_env names SUT_HEADERS, which holds a JSON array, not an object"),
        ('{"X-Tenant": "acme-secret", "X-Level": 3, "X-On": true}',
         "retrieval.http.headers_env names SUT_HEADERS, whose headers ['X-Level', 'X-On'] have values that are not"),
        # What httpx would refuse with an error that quotes the header, value included.
        ('{"X acme-secret": "1", "X-Ok": "1", "X-Tenant:": "2"}',
         "retrieval.http.headers_env names SUT_HEADERS, which holds 2 key(s) that are not HTTP header names"),
        ('{"X-Tenant": "acme-secret\\r", "X-Name": "Ёлка acme-secret", "X-Ok": "1"}',
         "retrieval.http.headers_env names SUT_HEADERS, whose headers ['X-Name', 'X-Tenant'] have values an HTTP "
         "header cannot carry"),
    ],
)
def test_bad_headers_env_names_the_setting_and_the_variable_never_the_value(monkeypatch, value, message):
    if value is not None:
        monkeypatch.setenv("SUT_HEADERS", value)
    with pytest.raises(ValueError) as info:
        client_for(_auth_settings("http://127.0.0.1:9", headers_env="SUT_HEADERS"))
    assert str(info.value).startswith(message)
    assert "acme-secret" not in str(info.value)


@pytest.mark.parametrize(
    "value, why",
    [(None, "which is not set in the environment"), ("", "which is empty"), (" \t", "which is empty"),
     ("acme-secret\r", "whose value an HTTP header cannot carry"), ("acme-secret\n", "whose value an HTTP header"),
     (" acme-secret", "whose value an HTTP header"), ("acme-sécret", "whose value an HTTP header cannot carry")],
)
def test_a_bad_api_key_env_names_the_setting_and_the_variable_never_the_value(monkeypatch, value, why):
    monkeypatch.delenv("SUT_KEY", raising=False)
    if value is not None:
        monkeypatch.setenv("SUT_KEY", value)
    with pytest.raises(ValueError) as info:
        client_for(_auth_settings("http://127.0.0.1:9", api_key_env="SUT_KEY"))
    assert str(info.value).startswith(f"retrieval.http.api_key_env names SUT_KEY, {why}")
    assert "acme" not in str(info.value)


def test_authorization_from_both_api_key_env_and_headers_env_is_refused(monkeypatch):
    monkeypatch.setenv("SUT_KEY", "k")
    monkeypatch.setenv("SUT_HEADERS", '{"authorization": "Basic abc"}')
    with pytest.raises(ValueError, match="sets Authorization, which retrieval.http.api_key_env also sets"):
        client_for(_auth_settings("http://127.0.0.1:9", api_key_env="SUT_KEY", headers_env="SUT_HEADERS"))


def test_abstains_when_no_chunk_shares_a_term_with_the_question():
    with sut_server(CORPUS) as server, _client(server.url) as client:
        response = client.ask("How tall is Mount Everest?", k=2)
    assert response.abstained is True
    assert response.abstain_reason == "no_relevant_context"
    assert response.answer == ""
    assert response.references == []
    assert [(c.rank, c.score_final) for c in response.chunks] == [(1, 0.0), (2, 0.0)]


def test_abstained_is_none_when_the_api_does_not_say():
    with sut_server(CORPUS, abstention_fields=False) as server, _client(server.url) as client:
        response = client.ask("How tall is Mount Everest?", k=1)
    assert response.abstained is None
    assert response.abstain_reason is None
    assert "abstained" not in response.raw


def test_chunks_are_also_read_under_the_chunks_key():
    with sut_server(CORPUS, chunks_key="chunks") as server, _client(server.url) as client:
        response = client.ask("aerobic base", k=1)
    assert [c.chunk_id for c in response.chunks] == [chunk_id_of(VAULT, RUN)]
    assert response.answer == "Long runs build aerobic base."


def test_missing_scores_are_none_and_chunks_are_sorted_by_rank():
    payload = {
        "answer": "x",
        "retrieved_chunks": [
            {"chunk_id": "b", "rel_path": "n.md", "heading_path": "# B", "text": "bee", "rank": 2, "score_final": 0.1},
            {"chunk_id": "a", "rel_path": "n.md", "heading_path": "", "text": "ay", "rank": 1, "score_vector": None},
        ],
    }
    response = parse_sut_response(json.dumps(payload).encode(), "http://sut/ask", 0.5, 1)
    assert [(c.chunk_id, c.score_vector, c.score_lexical, c.score_final) for c in response.chunks] == [
        ("a", None, None, None),
        ("b", None, None, 0.1),
    ]
    assert response.references == []
    assert response.abstained is None


def test_every_shape_problem_is_reported_with_its_field():
    payload = {
        "answer": 3,
        "abstained": "no",
        "retrieved_chunks": [
            {"chunk_id": "", "rel_path": "n.md", "heading_path": "", "text": "t", "rank": 1, "score_final": "high"},
            {"rel_path": "n.md", "heading_path": "", "text": "t", "rank": 1},
        ],
    }
    with pytest.raises(InputError) as info:
        parse_sut_response(json.dumps(payload).encode(), "http://sut/ask", 0.5, 1)
    fields = [p.field for p in info.value.problems]
    assert fields == [
        "answer",
        "abstained",
        "retrieved_chunks[0].chunk_id",
        "retrieved_chunks[0].score_final",
        "retrieved_chunks[1].chunk_id",
        "retrieved_chunks[1].rank",
    ]
    assert all(p.file == "http://sut/ask" for p in info.value.problems)
    assert "rank 1 repeats retrieved_chunks[0].rank" in str(info.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[]", "response is a JSON list, not an object"),
        (b'{"answer": "x"}', "field 'retrieved_chunks': missing"),
        (b'{"answer": "x", "chunks": [], "retrieved_chunks": []}', "both 'retrieved_chunks' and 'chunks'"),
    ],
)
def test_responses_off_the_contract_are_named(body, message):
    with pytest.raises(InputError, match=message):
        parse_sut_response(body, "http://sut/ask", 0.5, 1)


def test_wrong_shape_from_the_server_names_the_missing_fields_without_retrying():
    with sut_server(CORPUS, faults=["wrong_shape"]) as server, _client(server.url) as client:
        with pytest.raises(InputError) as info:
            client.ask("string sort", k=4)
        assert len(server.requests) == 1
    message = str(info.value)
    assert f"{server.url}/api/v1/ask?debug=true: field 'retrieved_chunks[3].chunk_id': missing" in message
    assert "field 'retrieved_chunks[0].rank': must be an integer >= 1, got '1'" in message


def test_truncated_json_is_a_clear_error():
    with sut_server(CORPUS, faults=["truncated_json"]) as server, _client(server.url) as client:
        with pytest.raises(InputError, match=r"/api/v1/ask\?debug=true: response is not JSON"):
            client.ask("string sort", k=2)


def test_429_waits_as_retry_after_says():
    delays: list[float] = []
    slow = RetryPolicy(max_attempts=4, base_delay=10.0, jitter=False)
    with sut_server(CORPUS, faults=[429, 429], retry_after="0") as server:
        with _client(server.url, delays, retry=slow) as client:
            response = client.ask("string sort", k=1)
        assert len(server.requests) == 3
    assert delays == [0.0, 0.0]  # not the 10 s and 20 s the backoff alone would give
    assert response.attempts == 3
    assert response.answer == "Go has no built in string sort."


def test_500_then_success_backs_off_and_logs_without_the_api_key(caplog):
    delays: list[float] = []
    with sut_server(CORPUS, faults=[500]) as server:
        with caplog.at_level(logging.WARNING), _client(server.url, delays, headers={"X-Api-Key": "k-secret"}) as client:
            response = client.ask("string sort", k=1)
    assert delays == [0.25]
    assert response.attempts == 2
    assert "attempt 1: status 500 of 3; retrying in 0.25 s" in caplog.text
    assert "k-secret" not in caplog.text


def test_hang_past_the_read_timeout_is_retried():
    delays: list[float] = []
    with sut_server(CORPUS, faults=["hang"]) as server:
        with _client(server.url, delays, read_timeout=0.3) as client:
            response = client.ask("string sort", k=1)
        assert len(server.requests) == 2
    assert response.attempts == 2
    assert delays == [0.25]
    assert 0.3 <= response.latency_s < 3.0  # the timed-out attempt counts in the wall time
    assert response.chunks[0].chunk_id == chunk_id_of(VAULT, GO)


def test_refused_connection_fails_after_max_attempts():
    delays: list[float] = []
    url = f"http://127.0.0.1:{unused_port()}"
    with _client(url, delays, connect_timeout=0.5) as client:
        with pytest.raises(HttpCallError) as info:
            client.ask("string sort", k=1)
    err = info.value
    assert len(err.attempts) == 3 and err.last_status is None
    assert "ConnectError" in err.last_error
    assert str(err).startswith(f"POST {url}/api/v1/ask?debug=true failed after 3 attempt(s) (attempt 1: ConnectError")
    assert delays == [0.25, 0.5]


def test_404_fails_at_once():
    delays: list[float] = []
    with sut_server(CORPUS) as server, _client(server.url, delays, path="/api/v2/ask") as client:
        with pytest.raises(HttpCallError, match="failed after 1 attempt") as info:
            client.ask("string sort", k=1)
        assert len(server.requests) == 1
    assert info.value.last_status == 404
    assert delays == []


def test_config_and_arguments_are_checked():
    with pytest.raises(ValueError, match="base_url"):
        HttpSutConfig(base_url="localhost:9000")
    with pytest.raises(ValueError, match="base_url has a fragment"):
        HttpSutConfig(base_url="http://x/#token=1")
    with pytest.raises(ValueError, match="base_url sets `debug`"):
        HttpSutConfig(base_url="http://x/?debug=false")
    with pytest.raises(ValueError, match="path must be a path only"):
        HttpSutConfig(base_url="http://x", path="/ask?token=1")
    with pytest.raises(ValueError, match="extra_body"):
        HttpSutConfig(base_url="http://x", extra_body={"k": 3})
    with _client("http://127.0.0.1:9") as client:
        with pytest.raises(ValueError, match="k must be"):
            client.ask("q", k=0)
        with pytest.raises(ValueError, match="empty"):
            client.ask("  ", k=1)


def test_results_frame_has_one_row_per_retrieved_chunk():
    with sut_server(CORPUS) as server, _client(server.url) as client:
        responses = [client.ask("Golang string sort?", k=2), client.ask("aerobic base pace", k=3)]
    frame = sut_results_frame(["q1", "q2"], responses, "sut-http")
    assert tuple(frame.columns) == SUT_RESULT_COLUMNS
    assert frame["query_id"].tolist() == ["q1", "q1", "q2", "q2", "q2"]
    assert frame["rank"].tolist() == [1, 2, 1, 2, 3]
    assert set(frame["retriever"]) == {"sut-http"}
    assert frame["chunk_id"].tolist()[:2] == [chunk_id_of(VAULT, GO), chunk_id_of(VAULT, PY)]
    assert frame["doc_id"].tolist()[:3] == [GO.rel_path, PY.rel_path, RUN.rel_path]
    assert frame["score"].tolist()[0] == pytest.approx(0.6)
    assert frame["score_lexical"].tolist()[2] == pytest.approx(1.0)  # aerobic, base, pace all in the running note
    assert frame["latency_s"].tolist()[2:] == [responses[1].latency_s] * 3
    assert str(frame["rank"].dtype) == "int64" and str(frame["score_vector"].dtype) == "float64"
    assert not math.isnan(frame["score_vector"].iloc[0])
    with pytest.raises(ValueError, match="2 question ids but 1 responses"):
        sut_results_frame(["q1", "q2"], responses[:1], "sut-http")
    assert list(sut_results_frame([], [], "sut-http").columns) == list(SUT_RESULT_COLUMNS)
