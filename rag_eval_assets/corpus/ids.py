"""Stable chunk ids (seed 002): the same corpus, file, heading and text give the same id everywhere."""

from __future__ import annotations

import hashlib

_SEPARATOR = "\x1f"  # ASCII unit separator: cannot occur in ids, paths or headings by accident


def chunk_id(corpus_id: str, rel_path: str, heading_path: str, text: str) -> str:
    """First 16 hex chars of sha256 over the four fields joined by U+001F, UTF-8 encoded.

    A content hash, not Python's salted hash(), so ids agree across runs, machines and versions.
    """
    payload = _SEPARATOR.join((corpus_id, rel_path, heading_path, text)).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()[:16]
