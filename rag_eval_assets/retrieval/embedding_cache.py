"""A persistent embedding cache: one SQLite file (WAL mode), one row per (model id, sha256 of the exact text the
model sees, prefix included), the vector stored as a float32 blob.

With it a re-run over unchanged chunks encodes nothing, and after an edit only the changed chunks are encoded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from rag_eval_assets.retrieval.encoders import Encoder, Kind
from rag_eval_assets.sqlite_wal import connect

# Keys per SELECT: stays under SQLite's bound-parameter limit on every build.
_LOOKUP_BATCH = 500


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


def encode_cached(encoder: Encoder, texts: list[str], kind: Kind, cache: EmbeddingCache | None) -> np.ndarray:
    """Vectors for `texts` (len(texts) x encoder.dim, float32). Texts whose input is not cached are encoded in one
    `encoder.encode` call (each distinct one once) and stored; with no cache everything is encoded."""
    if cache is None:
        return encoder.encode(texts, kind)
    keys = [text_key(encoder.input_text(t, kind)) for t in texts]
    vectors = cache.get(encoder.model_id, keys)
    missing = {key: text for key, text in zip(keys, texts) if key not in vectors}
    if missing:
        encoded = encoder.encode(list(missing.values()), kind)
        fresh = dict(zip(missing, encoded))
        cache.put(encoder.model_id, fresh)
        vectors.update(fresh)
    if not keys:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.stack([vectors[key] for key in keys])
