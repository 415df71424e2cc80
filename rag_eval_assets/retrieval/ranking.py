"""The result shapes every retriever returns, and the one deterministic top-k cut they all use."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

# (row index into the chunk list the retriever was built on, score): one query's hits, best first.
Ranking = list[tuple[int, float]]

# Score-block cells (queries x rows, float64) one top-k pass may hold: bounds search memory on large corpora
# (2**24 cells = 128 MiB, i.e. 16 queries at a time over 1M chunks, every query at once over a few thousand).
BLOCK_CELLS = 2**24


class Hit(NamedTuple):
    """One retrieved row with its score and each component's raw score; NaN where a component took no part."""

    row: int
    score: float
    score_bm25: float
    score_dense: float


def check_depth(depth: int) -> None:
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")


def queries_per_block(n_rows: int) -> int:
    return max(1, BLOCK_CELLS // max(n_rows, 1))


def mask_disallowed(block: np.ndarray, allowed: Sequence[frozenset[int] | None]) -> None:
    """Sets block[q, row] to -inf for every row outside allowed[q] (None: every row allowed), in place."""
    for q, rows in enumerate(allowed):
        if rows is not None:
            keep = np.zeros(block.shape[1], dtype=bool)
            keep[np.fromiter(rows, dtype=np.int64, count=len(rows))] = True
            block[q, ~keep] = -np.inf


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


def top_k_block(block: np.ndarray, depth: int, floor: float = -np.inf) -> list[Ranking]:
    """Per row of a (queries x candidate rows) score block, the `depth` best (column, score) pairs scoring above
    `floor`: score descending, ties by column ascending; -inf marks a column that is no candidate for that query.

    The same cut as `top_k`, for a whole block at once: np.partition finds every query's depth-th best score, every
    column scoring at least that much is kept (ties at the threshold included), then one lexsort orders the
    survivors of all queries by (query, -score, column) and each query keeps its first `depth`.
    """
    check_depth(depth)
    n_queries, n_cols = block.shape
    if n_cols > depth:
        threshold = np.partition(block, n_cols - depth, axis=1)[:, n_cols - depth]
        keep = (block >= threshold[:, None]) & (block > floor)
    else:
        keep = block > floor
    queries, cols = np.nonzero(keep)
    scores = block[queries, cols]
    order = np.lexsort((cols, -scores, queries))
    queries, cols, scores = queries[order], cols[order], scores[order]
    starts = np.searchsorted(queries, np.arange(n_queries + 1))
    cut = np.arange(len(queries)) - starts[queries] < depth
    queries, cols, scores = queries[cut], cols[cut].tolist(), scores[cut].tolist()
    bounds = np.searchsorted(queries, np.arange(n_queries + 1)).tolist()
    return [list(zip(cols[a:b], scores[a:b])) for a, b in zip(bounds, bounds[1:])]


def component_hits(rankings: list[Ranking], component: str) -> list[list[Hit]]:
    """Rankings of one retriever as hits whose own score is also its `component` ("bm25" or "dense") score."""
    nan = math.nan
    if component == "bm25":
        return [[Hit(row, score, score, nan) for row, score in ranking] for ranking in rankings]
    return [[Hit(row, score, nan, score) for row, score in ranking] for ranking in rankings]
