"""The joint correction across the gate's cells: Westfall and Young's step-down max-T with sign flips.

A comparison judges many cells (retriever x k) on the same questions. Testing them one by one and dividing alpha by
their number (Bonferroni, Holm) spends power on cells that cannot move: a retriever nobody touched has every
difference 0, and the k values of one retriever are nearly the same test. Here the questions are the unit of
resampling: one random sign per question flips that question's difference in every cell at once, which keeps the
correlation between cells. Each cell's statistic is standardised, T_j = |sum_i s_i d_ij| / sqrt(sum_i d_ij**2) (the
denominator does not change under flips, so T_j orders patterns as the cell's own sign-flip test does), and a cell's
adjusted p-value is the share of patterns whose largest T among the cells not yet declared is at least the cell's
observed T (step-down, Westfall & Young 1993, algorithm 2.8; Romano & Wolf 2005). A cell whose differences are all 0
has T = 0 under every pattern: it never raises the maximum, so it dilutes nothing. The family-wise error rate is
controlled strongly under subset pivotality, which sign flips of whole questions give.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from rag_eval_assets.verdict.signs import is_exact, p_from_counts, sign_blocks

# Standardised statistics are of order sqrt(n); equal ones computed in another order differ in the last bits.
TOLERANCE = 1e-9


def max_t_adjusted(diffs: ArrayLike, *, n_perm: int = 10000, seed: int = 0) -> tuple[np.ndarray, bool]:
    """Adjusted two-sided p-values of the mean of each column of an (n questions, m cells) matrix of paired
    differences (NaN: the question has no pair in that cell), and whether every sign pattern was enumerated.

    Only the questions that moved in some cell carry a sign that matters; with 2**moved <= n_perm all their patterns
    are enumerated. A cell with no moved question gets 1.
    """
    d = np.nan_to_num(np.asarray(diffs, dtype=float), nan=0.0)  # a missing pair adds nothing to a cell's sums
    if d.ndim != 2:
        raise ValueError(f"expected an (n, m) matrix, got shape {d.shape}")
    adjusted = np.ones(d.shape[1])
    scale = np.sqrt((d**2).sum(axis=0))
    active = np.flatnonzero(scale > 0)
    if len(active) == 0:
        return adjusted, True
    moved = np.flatnonzero((d[:, active] != 0).any(axis=1))
    x = d[np.ix_(moved, active)] / scale[active]
    observed = np.abs(x.sum(axis=0))
    order = np.argsort(-observed, kind="stable")  # most significant first
    x, observed = x[:, order], observed[order] - TOLERANCE
    extreme = np.zeros(len(active), dtype=np.int64)
    for signs in sign_blocks(len(moved), n_perm, [seed, len(moved), 2]):
        t = np.abs(signs @ x)
        # successive maxima over the cells from each one to the least significant
        running = np.maximum.accumulate(t[:, ::-1], axis=1)[:, ::-1]
        extreme += np.count_nonzero(running >= observed, axis=0)
    p = np.minimum(np.maximum.accumulate(p_from_counts(extreme, len(moved), n_perm)), 1.0)
    adjusted[active[order]] = p
    return adjusted, is_exact(len(moved), n_perm)
