"""The LLM reply cache: keys, re-runs that send nothing, a process killed mid-batch, and concurrent writers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from rag_eval_assets.llm import LLMCache, LLMClient, LLMSettings, cache_key
from rag_eval_assets.llm.cache import CachedReply
from rag_eval_assets_tests.llm_fault_server import Reply, echo, llm_fault_server

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}

# A run in a child process: asks "question <i>" for i in [start, stop) through chat_many against a shared cache.
RUN_BATCH = """
import sys
from rag_eval_assets.llm import LLMCache, LLMClient, LLMSettings
base_url, cache_path, start, stop, concurrency = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
settings = LLMSettings(base_url=base_url, model="m", max_concurrency=concurrency)
with LLMCache(cache_path) as cache, LLMClient(settings, cache) as client:
    calls = client.chat_many([{"messages": [{"role": "user", "content": f"question {i}"}], "prompt_version": "v1"}
                              for i in range(start, stop)])
assert all(c.error is None for c in calls), [c.error for c in calls]
"""


def _run_batch(base_url: str, cache_path, start: int, stop: int, concurrency: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN_BATCH, base_url, str(cache_path), str(start), str(stop),
                             str(concurrency)], stderr=subprocess.PIPE, text=True)


def _integrity(path) -> str:
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def _cached_contents(path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, content FROM llm_replies"))


def _key(**overrides) -> str:
    parts = dict(model="m", prompt_version="v1", temperature=0.0, seed=0, params={"max_tokens": 512},
                 schema=SCHEMA, messages=[{"role": "user", "content": "hi"}])
    parts.update(overrides)
    return cache_key(**parts)


def test_the_key_is_canonical_and_changes_with_every_part():
    reordered = {"required": ["answer"], "properties": {"answer": {"type": "string"}}, "type": "object"}
    assert _key() == _key(schema=reordered) == _key(temperature=0)
    assert len(_key()) == 64
    variants = [
        _key(model="m2"),
        _key(prompt_version="v2"),
        _key(temperature=0.7),
        _key(seed=1),
        _key(params={"max_tokens": 256}),
        _key(schema=None),
        _key(messages=[{"role": "user", "content": "hi!"}]),
        _key(messages=[{"role": "system", "content": "hi"}]),
    ]
    assert len({_key(), *variants}) == len(variants) + 1


def test_an_unchanged_rerun_sends_zero_requests(tmp_path):
    path = tmp_path / "llm.sqlite"
    batch = [{"messages": [{"role": "user", "content": f"question {i}"}], "prompt_version": "v1"} for i in range(5)]
    batch.append({"messages": [{"role": "user", "content": "structured"}], "prompt_version": "v1", "schema": SCHEMA})
    replies = {"structured": '{"answer": "yes"}'}
    with llm_fault_server(responder=lambda body: _reply_for(body, replies)) as server:
        settings = LLMSettings(base_url=server.base_url, model="m", price_per_1k={"m": (1.0, 1.0)})
        with LLMCache(path) as cache, LLMClient(settings, cache) as first:
            fresh = first.chat_many(batch)
        assert len(server.requests) == 6
        with LLMCache(path) as cache, LLMClient(settings, cache) as rerun:
            again = rerun.chat_many(batch)
            usage = rerun.usage()
        assert len(server.requests) == 6  # nothing new reached the server
    assert all(c.cached for c in again) and not any(c.cached for c in fresh)
    assert [c.content for c in again] == [c.content for c in fresh]
    assert again[-1].data == fresh[-1].data == {"answer": "yes"}
    assert [(c.prompt_tokens, c.completion_tokens, c.latency_s) for c in again] == \
        [(c.prompt_tokens, c.completion_tokens, c.latency_s) for c in fresh]
    assert all(c.cost_usd == 0.0 and c.attempts == 0 for c in again)
    assert usage == {"calls": 6, "requests": 0, "cache_hits": 6, "prompt_tokens": 0, "completion_tokens": 0,
                     "cost_usd": 0.0, "errors": 0, "unpriced_calls": 0, "missing_usage": 0}


def _reply_for(body, replies):
    content = body["messages"][-1]["content"]
    return Reply(replies[content]) if content in replies else echo(body)


def test_a_changed_setting_misses_the_cache(tmp_path):
    messages = [{"role": "user", "content": "question"}]
    with llm_fault_server() as server, LLMCache(tmp_path / "llm.sqlite") as cache:
        for seed in (0, 0, 1):
            with LLMClient(LLMSettings(base_url=server.base_url, model="m", seed=seed), cache) as client:
                client.chat(messages, prompt_version="v1")
        with LLMClient(LLMSettings(base_url=server.base_url, model="m"), cache) as client:
            client.chat(messages, prompt_version="v2")
        assert len(server.requests) == 3
        assert len(cache) == 3


def test_a_process_killed_mid_batch_leaves_a_readable_cache_and_the_rerun_sends_only_the_rest(tmp_path):
    path, n = tmp_path / "llm.sqlite", 16
    with llm_fault_server(delay_s=0.25) as server:
        child = _run_batch(server.base_url, path, 0, n, 2)
        deadline = time.monotonic() + 60
        done = 0
        while done < 4:
            assert child.poll() is None, f"the batch ended before it was killed: {child.stderr.read()}"
            assert time.monotonic() < deadline, "the batch made no progress"
            time.sleep(0.05)
            if path.exists():
                with LLMCache(path) as cache:
                    done = len(cache)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        child.stderr.close()
        assert child.returncode == -signal.SIGKILL

        assert _integrity(path) == "ok"
        kept = _cached_contents(path)
        assert 4 <= len(kept) < n
        assert set(kept.values()) <= {f"echo: question {i}" for i in range(n)}
        sent_before = len(server.requests)

        rerun = _run_batch(server.base_url, path, 0, n, 2)
        _, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err
        assert len(server.requests) - sent_before == n - len(kept)
    assert _integrity(path) == "ok"
    final = _cached_contents(path)
    assert sorted(final.values()) == sorted(f"echo: question {i}" for i in range(n))
    assert {k: final[k] for k in kept} == kept


def test_two_processes_writing_one_cache_do_not_corrupt_it(tmp_path):
    path = tmp_path / "llm.sqlite"
    with llm_fault_server() as server:
        writers = [_run_batch(server.base_url, path, 0, 150, 3), _run_batch(server.base_url, path, 75, 225, 3)]
        for writer in writers:
            _, err = writer.communicate(timeout=180)
            assert writer.returncode == 0, err
        assert 225 <= len(server.requests) <= 300  # an overlapping question may be asked by both
    assert _integrity(path) == "ok"
    assert sorted(_cached_contents(path).values()) == sorted(f"echo: question {i}" for i in range(225))


def test_put_keeps_the_first_reply_for_a_key(tmp_path):
    with LLMCache(tmp_path / "llm.sqlite") as cache:
        cache.put("k", "m", "v1", CachedReply("first", 1, 2, 0.5))
        cache.put("k", "m", "v1", CachedReply("second", 3, 4, 0.6))
        assert cache.get("k") == CachedReply("first", 1, 2, 0.5)
        assert cache.get("absent") is None
        assert len(cache) == 1
        with sqlite3.connect(cache.path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_key_refuses_values_json_cannot_carry(bad):
    with pytest.raises(ValueError):
        _key(params={"top_p": bad})
