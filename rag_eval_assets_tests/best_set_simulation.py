"""The confidence set of the best (verdict/best_set.py) on synthetic per-question scores with a known best. Shared by
test_verdict_best_set.py (the assertions) and benchmarks/best_set.py (the table in docs/runs.md).

A run of m variants scores n questions. `ties` variants share the best true mean; the other m - ties are `gap`
below it. Two score models:

- normal: x_qv = a_q + mu_v + e_qv, question effects a_q ~ N(0, 0.2) shared by every variant, independent noise
  e_qv ~ N(0, 0.3), mu of a best variant 0, of the others -gap: unbounded scores, exchangeable noise;
- ndcg: bounded and discrete like a retrieval metric: each question has a quality ~ Beta(2, 2); variant v finds
  the question's one relevant chunk with probability quality + delta_v (clipped to [0, 1]; delta 0 for a best
  variant, -gap for the others) at a geometric rank (p 0.45), and scores its nDCG@10 (1 / log2(1 + rank), 0 beyond
  rank 10 or when not found). The gap is on the finding probability: about 0.7 x gap in mean nDCG.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from rag_eval_assets.verdict.best_set import best_set

MODELS = ("normal", "ndcg")


def scores(model: str, m: int, n: int, gap: float, ties: int, rng: np.random.Generator) -> np.ndarray:
    """(n, m) per-question scores; variants 0 .. ties - 1 are the true best."""
    offset = np.where(np.arange(m) < ties, 0.0, -gap)
    if model == "normal":
        return rng.normal(0, 0.2, (n, 1)) + offset + rng.normal(0, 0.3, (n, m))
    if model == "ndcg":
        found = rng.random((n, m)) < np.clip(rng.beta(2, 2, (n, 1)) + offset, 0, 1)
        ranks = rng.geometric(0.45, (n, m))
        return np.where(found & (ranks <= 10), 1 / np.log2(1 + ranks), 0.0)
    raise ValueError(f"unknown model {model!r}; known: {MODELS}")


@dataclass(frozen=True)
class Outcome:
    repetitions: int
    covered: float  # share of repetitions whose set holds variant 0 (a true best)
    covered_any: float  # ... holds some true best
    covered_all: float  # ... holds every true best
    size: float  # mean size of the set
    argmax_wrong: float  # share of repetitions whose highest mean is not a true best


def simulate(model: str, m: int, n: int, gap: float, ties: int, repetitions: int, *, alpha: float = 0.05,
             n_perm: int = 1000, seed: int = 0) -> Outcome:
    rng = np.random.default_rng([seed, m, n, int(gap * 1000), ties, MODELS.index(model)])
    covered = covered_any = covered_all = size = wrong = 0
    # One BLAS thread: these products are small, and on a busy machine waking threads for each costs more (up to
    # 10 ms a product) than they give. threadpoolctl comes with the test extra's scikit-learn.
    with threadpool_limits(1, user_api="blas"):
        for r in range(repetitions):
            x = scores(model, m, n, gap, ties, rng)
            members = best_set(x, alpha=alpha, n_perm=n_perm, seed=r).members
            covered += members[0]
            covered_any += members[:ties].any()
            covered_all += members[:ties].all()
            size += members.sum()
            wrong += int(np.argmax(x.mean(axis=0))) >= ties
    return Outcome(repetitions, *(float(v) / repetitions for v in (covered, covered_any, covered_all, size, wrong)))
