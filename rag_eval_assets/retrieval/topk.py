"""The result shapes every retriever returns (a ranking, a hit with its score per role), and the one deterministic
top-k cut they all use."""

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
# Columns per group in top_k_block's threshold search: one pass of group maxima is much cheaper than partitioning
# every row, and the threshold it gives lets through only a few columns more than `depth` per query.
_GROUP = 32


# The parts a fusion combines, by role rather than by kind: each kind declares the role its scores play
# (registry.RetrieverKind.role), and its raw scores fill the column score_<role> of Hit and of the results table.
ROLES = ("lexical", "semantic")


class Hit(NamedTuple):
    """One retrieved row with its score and each role's raw score; NaN where no retriever of that role took part."""

    row: int
    score: float
    score_lexical: float
    score_semantic: float


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

    The same result as `top_k` per row, for a whole block at once. Each row is cut at a threshold no higher than its
    depth-th best score, so every column of its top `depth` (ties at the cut included) survives: the depth-th largest
    of the maxima of `depth` or more column groups (at least `depth` columns reach it) or, if higher, the floor. One
    pass finds the survivors, a few per query, and one sort of those orders them by (query, -score, column).
    """
    check_depth(depth)
    n_queries, n_cols = block.shape
    # Above the floor, as a >= test: the floor's next float up.
    threshold = np.full(n_queries, np.nextafter(floor, np.inf))
    if n_cols > depth:
        group_maxima = np.maximum.reduceat(block, np.arange(0, n_cols, min(_GROUP, n_cols // depth)), axis=1)
        n_groups = group_maxima.shape[1]
        cut = np.partition(group_maxima, n_groups - depth, axis=1)[:, n_groups - depth]
        np.maximum(threshold, cut, out=threshold)
    # The block is C-ordered, so the survivors come out by query, then column.
    flat = np.flatnonzero(block >= threshold[:, None])
    queries = flat // n_cols
    scores = block.ravel()[flat]
    order = np.lexsort((-scores, queries))  # stable: equal scores stay in column order
    queries, flat, scores = queries[order], flat[order], scores[order]
    starts = np.searchsorted(queries, np.arange(n_queries + 1))
    kept = np.arange(len(queries)) - starts[queries] < depth
    queries, flat, scores = queries[kept], flat[kept], scores[kept]
    cols = (flat - queries * n_cols).tolist()
    scores = scores.tolist()
    bounds = np.searchsorted(queries, np.arange(n_queries + 1)).tolist()
    return [list(zip(cols[a:b], scores[a:b])) for a, b in zip(bounds, bounds[1:])]


def role_hits(rankings: list[Ranking], role: str) -> list[list[Hit]]:
    """Rankings of one retriever as hits whose own score is also the score of its `role` (one of ROLES)."""
    nan = math.nan
    if role == "lexical":
        return [[Hit(row, score, score, nan) for row, score in ranking] for ranking in rankings]
    if role == "semantic":
        return [[Hit(row, score, nan, score) for row, score in ranking] for ranking in rankings]
    raise ValueError(f"{role!r} is not one of the roles {', '.join(ROLES)}")
