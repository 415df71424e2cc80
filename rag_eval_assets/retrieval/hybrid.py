"""Fusion of several retrievers' rankings for the same queries. Raw scores of different retrievers are never added:
they live on different scales (BM25 is unbounded, cosine is in [-1, 1]).

- Reciprocal rank fusion: score(d) = sum over input rankings containing d of 1 / (k + rank(d)), rank 1-based.
- Convex combination: each input ranking is min-max normalised per query over its own candidates,
  norm(d) = (s(d) - min) / (max - min), or 1.0 for every candidate when max == min; a candidate missing from one
  ranking gets 0 there; score(d) = alpha * norm_a(d) + (1 - alpha) * norm_b(d).

Both cut to `depth`, score descending, ties by row ascending, and keep each input's rank and raw score of every fused
row so results can record each role's score (score_lexical, score_semantic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag_eval_assets.retrieval.topk import Ranking, check_depth, top_k


@dataclass(frozen=True)
class Component:
    """Where one input ranking put a fused row."""

    rank: int  # 1-based
    score: float  # that retriever's raw score


@dataclass(frozen=True)
class Fusion:
    """`rankings[q]` is the fused ranking of query q; `components[q][row]` has one entry per input ranking, in input
    order, None where that input did not retrieve the row."""

    rankings: list[Ranking]
    components: list[dict[int, tuple[Component | None, ...]]]


def _check_aligned(inputs: Sequence[list[Ranking]]) -> None:
    counts = {len(results) for results in inputs}
    if len(counts) > 1:
        raise ValueError(f"rankings to fuse cover different numbers of queries: {[len(r) for r in inputs]}")


def _fuse(inputs: Sequence[list[Ranking]], fused_scores: list[dict[int, float]], depth: int) -> Fusion:
    rankings: list[Ranking] = []
    components: list[dict[int, tuple[Component | None, ...]]] = []
    for q, scores in enumerate(fused_scores):
        if not scores:
            rankings.append([])
            components.append({})
            continue
        ranking = top_k(np.fromiter(scores, dtype=np.int64), np.fromiter(scores.values(), dtype=np.float64), depth)
        by_input = [{row: Component(rank, score) for rank, (row, score) in enumerate(results[q], 1)}
                    for results in inputs]
        rankings.append(ranking)
        components.append({row: tuple(found.get(row) for found in by_input) for row, _ in ranking})
    return Fusion(rankings, components)


def rrf(rankings: Sequence[list[Ranking]], *, k: float = 60, depth: int) -> Fusion:
    """Reciprocal rank fusion of any number of retrievers' per-query rankings."""
    check_depth(depth)
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    _check_aligned(rankings)
    n_queries = len(rankings[0]) if rankings else 0
    fused: list[dict[int, float]] = [{} for _ in range(n_queries)]
    for results in rankings:
        for scores, ranking in zip(fused, results):
            for rank, (row, _) in enumerate(ranking, 1):
                scores[row] = scores.get(row, 0.0) + 1.0 / (k + rank)
    return _fuse(rankings, fused, depth)


def _min_max(ranking: Ranking) -> dict[int, float]:
    if not ranking:
        return {}
    scores = np.array([score for _, score in ranking], dtype=np.float64)
    low, high = scores.min(), scores.max()
    normalised = np.ones_like(scores) if high == low else (scores - low) / (high - low)
    return {row: float(n) for (row, _), n in zip(ranking, normalised)}


def convex(rankings_a: list[Ranking], rankings_b: list[Ranking], *, alpha: float = 0.5, depth: int) -> Fusion:
    """Convex combination of two retrievers' min-max normalised scores; alpha weighs `rankings_a`."""
    check_depth(depth)
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    _check_aligned([rankings_a, rankings_b])
    fused: list[dict[int, float]] = []
    for ranking_a, ranking_b in zip(rankings_a, rankings_b):
        norm_a, norm_b = _min_max(ranking_a), _min_max(ranking_b)
        fused.append({row: alpha * norm_a.get(row, 0.0) + (1 - alpha) * norm_b.get(row, 0.0)
                      for row in norm_a.keys() | norm_b.keys()})
    return _fuse([rankings_a, rankings_b], fused, depth)
