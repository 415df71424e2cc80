from __future__ import annotations

import random
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime, formatdate

import httpx
import pytest

from rag_eval_assets.http_retry import HttpCallError, RetryPolicy, retry_after_seconds, send_with_retries
from rag_eval_assets_tests.sut_server import CorpusChunk, sut_server

CORPUS = [CorpusChunk("Software/Go.md", "# Go", "Go has no built in string sort.")]


def _call(server_url: str, policy: RetryPolicy, delays: list[float], path: str = "/api/v1/ask"):
    with httpx.Client(timeout=2.0) as client:
        return send_with_retries(
            client,
            lambda: client.build_request("POST", server_url + path, json={"question": "string sort", "k": 1}),
            policy,
            sleep=delays.append,
            rng=random.Random(7),
        )


def test_backoff_doubles_from_base_and_stops_at_max_delay():
    policy = RetryPolicy(base_delay=0.5, max_delay=30.0, jitter=False)
    assert [policy.backoff(i, random.Random(0)) for i in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_full_jitter_stays_between_zero_and_the_capped_backoff():
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=True)
    rng = random.Random(1)
    draws = [[policy.backoff(i, rng) for _ in range(200)] for i in range(5)]
    for i, values in enumerate(draws):
        ceiling = min(3.0, 0.5 * 2**i)
        assert all(0.0 <= v <= ceiling for v in values)
        assert max(values) > 0.8 * ceiling  # full jitter spans the whole range, not a narrow band
        assert min(values) < 0.2 * ceiling


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="delays"):
        RetryPolicy(base_delay=-1)


def test_retry_after_reads_seconds_and_http_dates():
    now = datetime(2025, 1, 15, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after_seconds("3", now) == 3.0
    assert retry_after_seconds(" 1.5 ", now) == 1.5
    assert retry_after_seconds("-4", now) == 0.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=90), usegmt=True), now) == 90.0
    assert retry_after_seconds("Wed, 15 Jan 2025 11:59:00 GMT", now) == 0.0  # already past
    assert retry_after_seconds("soon", now) is None


def test_each_retryable_status_is_retried_until_success():
    delays: list[float] = []
    with sut_server(CORPUS, faults=[502, 503, 504]) as server:
        sent = _call(server.url, RetryPolicy(base_delay=0.1, jitter=False), delays)
        assert len(server.requests) == 4
    assert sent.response.status_code == 200
    assert [a.status for a in sent.attempts] == [502, 503, 504, 200]
    assert len(sent.attempts) == 4  # three retries
    assert delays == [0.1, 0.2, 0.4]
    assert [a.delay_s for a in sent.attempts] == [0.1, 0.2, 0.4, None]


def test_retry_after_http_date_from_the_server_is_honoured():
    delays: list[float] = []
    with sut_server(CORPUS, faults=[429], retry_after=formatdate(time.time() + 3, usegmt=True)) as server:
        _call(server.url, RetryPolicy(base_delay=10.0, max_delay=20.0, jitter=False), delays)
    assert len(delays) == 1 and 1.0 < delays[0] <= 3.0  # the date has whole-second resolution


def test_retry_after_is_capped_at_max_delay():
    delays: list[float] = []
    with sut_server(CORPUS, faults=[429], retry_after="600") as server:
        _call(server.url, RetryPolicy(max_delay=5.0), delays)
    assert delays == [5.0]


def test_other_client_errors_fail_at_once():
    delays: list[float] = []
    with sut_server(CORPUS, faults=[400]) as server:
        with pytest.raises(HttpCallError) as info:
            _call(server.url, RetryPolicy(), delays)
        assert len(server.requests) == 1
    assert delays == []
    assert info.value.last_status == 400
    assert "after 1 attempt(s)" in str(info.value)
    assert "scripted 400" in str(info.value)  # the server's own explanation is kept


def test_exhausted_attempts_raise_with_url_history_and_last_status():
    delays: list[float] = []
    with sut_server(CORPUS, faults=[500, 503, 500]) as server:
        with pytest.raises(HttpCallError) as info:
            _call(server.url, RetryPolicy(max_attempts=3, base_delay=0.01), delays)
        url = server.url + "/api/v1/ask"
    err = info.value
    assert err.url == url and err.method == "POST"
    assert err.last_status == 500
    assert [a.status for a in err.attempts] == [500, 503, 500]
    assert len(delays) == 2
    assert str(err).startswith(f"POST {url} failed after 3 attempt(s)")
    assert "attempt 2: status 503" in str(err)
