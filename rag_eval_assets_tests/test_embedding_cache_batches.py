"""encode_cached commits batch by batch: a SIGKILLed encode loses at most the batch in flight, and the next run
encodes only the texts not stored yet. Progress is reported per committed batch."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, encode_cached
from rag_eval_assets.retrieval.encoders import UniversalSentenceEncoder, get_encoder
from rag_eval_assets_tests.counting_encoder import CountingEncoder

REPO = Path(__file__).resolve().parents[1]
TOTAL = 4000
BATCH = 50


def texts(n: int) -> list[str]:
    return [f"short sentence number {i} about topic {i % 37}" for i in range(n)]


@pytest.fixture(scope="module")
def use() -> UniversalSentenceEncoder:
    return get_encoder("use-multilingual-v3")


def stored_rows(path: Path) -> int:
    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    except sqlite3.OperationalError:  # the child has not created the table yet
        return 0
    finally:
        db.close()


def test_a_killed_encode_keeps_its_committed_batches_and_the_rerun_encodes_only_the_rest(use, tmp_path):
    cache_file = tmp_path / "embeddings.sqlite"
    child = textwrap.dedent(f"""
        from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, encode_cached
        from rag_eval_assets.retrieval.encoders import get_encoder
        texts = [f"short sentence number {{i}} about topic {{i % 37}}" for i in range({TOTAL})]
        encode_cached(get_encoder("use-multilingual-v3"), texts, "passage", EmbeddingCache({str(cache_file)!r}),
                      batch_size={BATCH})
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-c", child], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while stored_rows(cache_file) < 2 * BATCH:
            assert process.poll() is None, f"the encoding process ended early:\n{process.stderr.read()}"
            assert time.monotonic() < deadline, "no two batches committed within 120 s"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL

    stored = stored_rows(cache_file)
    # Killed mid-encode: whole batches only, and some texts left to do.
    assert stored % BATCH == 0 and 2 * BATCH <= stored < TOTAL

    counting = CountingEncoder(use)
    cache = EmbeddingCache(cache_file)
    vectors = encode_cached(counting, texts(TOTAL), "passage", cache, batch_size=BATCH)
    assert counting.encoded == TOTAL - stored
    assert max(len(b) for b in counting.batches) <= BATCH
    assert stored_rows(cache_file) == TOTAL
    # The vectors the killed process committed are the model's vectors for those texts.
    np.testing.assert_allclose(vectors[:stored], use.encode(texts(stored), "passage"), atol=1e-5)


def test_progress_is_reported_after_each_batch_counting_only_texts_to_encode(use, tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    encode_cached(use, texts(3), "passage", cache)
    calls: list[tuple[int, int, float]] = []
    counting = CountingEncoder(use)
    # 3 cached texts, then 10 new ones, one of them twice: 10 texts to encode, in batches of 4.
    batch = texts(3) + texts(13)[3:] + [texts(13)[5]]
    encode_cached(counting, batch, "passage", cache, batch_size=4, progress=lambda *call: calls.append(call))
    assert [len(b) for b in counting.batches] == [4, 4, 2]
    assert [(done, total) for done, total, _ in calls] == [(4, 10), (8, 10), (10, 10)]
    assert all(rate > 0 for _, _, rate in calls)


def test_without_a_cache_texts_are_still_encoded_in_batches(use):
    counting = CountingEncoder(use)
    vectors = encode_cached(counting, texts(10), "passage", None, batch_size=3)
    assert [len(b) for b in counting.batches] == [3, 3, 3, 1]
    np.testing.assert_allclose(vectors, use.encode(texts(10), "passage"), atol=1e-5)


def test_a_batch_size_below_one_is_refused(use):
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        encode_cached(use, texts(2), "passage", None, batch_size=0)
