"""A persistent cache of LLM replies: one SQLite file in WAL mode, one row per request key.

The key is the sha256 of the canonical JSON of everything that decides the reply (see `cache_key`); the
endpoint URL and the API key are not part of it, so the same model served elsewhere shares the rows.
Only good replies are stored (errors are retried on the next run). Rows are written with INSERT OR IGNORE
in one short transaction each, so threads and processes may share a file, and a process killed mid-batch
loses at most the calls that were still in flight.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval_assets.sqlite_wal import connect

DEFAULT_CACHE_FILENAME = "llm.sqlite"  # beside embeddings.sqlite in Settings.cache_dir


def cache_key(
    *,
    model: str,
    prompt_version: str,
    temperature: float,
    seed: int,
    params: dict[str, Any],
    schema: dict[str, Any] | None,
    messages: list[dict[str, Any]],
) -> str:
    """sha256 of the canonical JSON (sorted keys, no whitespace) of the request's deciding parts."""
    canonical = json.dumps(
        {
            "model": model,
            "prompt_version": prompt_version,
            "temperature": float(temperature),
            "seed": seed,
            "params": params,
            "schema": schema,
            "messages": messages,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    content: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # of the call that produced the reply


class LLMCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by chat_many's threads; the lock keeps each statement whole.
        self._lock = threading.Lock()
        self._db = connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode still safe against a killed process
        with self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS llm_replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                "prompt_version TEXT NOT NULL, content TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, "
                "completion_tokens INTEGER NOT NULL, latency_s REAL NOT NULL, "
                "created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) WITHOUT ROWID"
            )

    def get(self, key: str) -> CachedReply | None:
        with self._lock:
            row = self._db.execute(
                "SELECT content, prompt_tokens, completion_tokens, latency_s FROM llm_replies WHERE key = ?", (key,)
            ).fetchone()
        return CachedReply(*row) if row else None

    def put(self, key: str, model: str, prompt_version: str, reply: CachedReply) -> None:
        """Store a reply; a key already present keeps its first reply."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO llm_replies (key, model, prompt_version, content, prompt_tokens, "
                "completion_tokens, latency_s) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, model, prompt_version, reply.content, reply.prompt_tokens, reply.completion_tokens,
                 reply.latency_s),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM llm_replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> LLMCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
