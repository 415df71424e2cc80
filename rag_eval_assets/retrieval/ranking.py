"""The result shape every retriever returns, and the one deterministic top-k cut they all use."""

from __future__ import annotations

import numpy as np

# (row index into the chunk list the retriever was built on, score): one query's hits, best first.
Ranking = list[tuple[int, float]]


def check_depth(depth: int) -> None:
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")


def top_k(rows: np.ndarray, scores: np.ndarray, depth: int) -> Ranking:
    """The `depth` best (row, score) pairs: score descending, ties broken by row ascending.

    np.argpartition finds the depth-th best score; every row scoring at least that much is kept before the exact
    sort, so which of several tied rows survive the cut does not depend on argpartition's internal order.
    """
    check_depth(depth)
    if len(scores) > depth:
        threshold = scores[np.argpartition(-scores, depth - 1)[depth - 1]]
        keep = scores >= threshold
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:depth]
    return [(int(r), float(s)) for r, s in zip(rows[order], scores[order])]
