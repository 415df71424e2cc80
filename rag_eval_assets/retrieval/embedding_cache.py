"""A persistent embedding cache: one SQLite file (WAL mode), one row per (model id, sha256 of the exact text the
model sees, prefix included), the vector stored as a float32 blob.

With it a re-run over unchanged chunks encodes nothing, and after an edit only the changed chunks are encoded. Texts
are encoded and committed in batches, so a run killed mid-encode loses at most the batch in flight: the next run
encodes only what is not stored yet.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from rag_eval_assets.retrieval.encoders import Encoder, Kind
from rag_eval_assets.sqlite_wal import connect

# Keys per SELECT: stays under SQLite's bound-parameter limit on every build.
_LOOKUP_BATCH = 500
# Texts encoded (and committed) per step: bounds both the work a crash loses and the gap between progress reports.
ENCODE_BATCH = 1024

# progress(done, total, texts_per_second) after each committed batch.
Progress = Callable[[int, int, float], None]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = connect(self.path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model_id TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
            "vector BLOB NOT NULL, PRIMARY KEY (model_id, text_sha256)) WITHOUT ROWID"
        )
        self._db.commit()

    def get(self, model_id: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), _LOOKUP_BATCH):
            batch = keys[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._db.execute(
                f"SELECT text_sha256, vector FROM embeddings WHERE model_id = ? AND text_sha256 IN ({marks})",
                [model_id, *batch],
            )
            found.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        return found

    def put(self, model_id: str, vectors: dict[str, np.ndarray]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO embeddings (model_id, text_sha256, vector) VALUES (?, ?, ?)",
                [(model_id, key, np.asarray(v, dtype=np.float32).tobytes()) for key, v in vectors.items()],
            )

    def close(self) -> None:
        self._db.close()


def encode_cached(
    encoder: Encoder,
    texts: list[str],
    kind: Kind,
    cache: EmbeddingCache | None,
    *,
    batch_size: int = ENCODE_BATCH,
    progress: Progress | None = None,
) -> np.ndarray:
    """Vectors for `texts` (len(texts) x encoder.dim, float32).

    Each distinct input the cache does not hold (all of them without a cache) is encoded once, in batches of at most
    `batch_size` texts, each batch committed to the cache before the next is encoded. After each batch
    `progress(done, total, texts_per_second)` is called: texts encoded so far in this call, texts this call encodes
    (cached and repeated texts are not counted), and the rate since the call started.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    keys = [text_key(encoder.input_text(t, kind)) for t in texts]
    vectors = cache.get(encoder.model_id, keys) if cache is not None else {}
    missing = list({key: text for key, text in zip(keys, texts) if key not in vectors}.items())
    started = time.perf_counter()
    for start in range(0, len(missing), batch_size):
        batch = missing[start : start + batch_size]
        fresh = dict(zip((key for key, _ in batch), encoder.encode([text for _, text in batch], kind)))
        if cache is not None:
            cache.put(encoder.model_id, fresh)
        vectors.update(fresh)
        if progress is not None:
            done = start + len(batch)
            progress(done, len(missing), done / max(time.perf_counter() - started, 1e-9))
    return np.stack([vectors[key] for key in keys])
