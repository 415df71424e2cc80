"""The confidence set of the best: which of several variants scored on the same questions may be the best, at level
alpha, by Hsu's multiple comparisons with the best (MCB) with max-T critical values from sign flips of whole
questions.

For each variant i and each other variant j, T_ji = sum_q d_q / sqrt(sum_q d_q**2) with d_q = x_qj - x_qi is the
standardised lead of j over i (0 when the two never differ: the statistic joint.py uses, one-sided). Variant i
leaves the set when some j leads it significantly: its statistic is M_i = max(0, max_j T_ji), its p-value the share
of sign patterns s (one sign per question, flipping that question's differences against i all at once, which keeps
their correlation) under which max(0, max_j sum_q s_q d_q / sqrt(sum_q d_q**2)) is at least the observed M_i, and
the set is the variants whose p-value exceeds alpha. The positive part is Hsu's constrained MCB: a variant no other
out-scores on the mean has M_i = 0 and p = 1, so the arg-max of the means is always in.

Why it covers the true best with probability at least 1 - alpha: for a best variant b every other variant j has
mu_j <= mu_b. Where every mu_j = mu_b (the least favourable configuration) and each question's vector of
differences against b is as likely as its negation (Gaussian noise gives it exactly; averages over many questions
nearly, which the simulation's bounded, discrete nDCG scores confirm), the sign flips are the exact null
distribution of the max over j, so b leaves the set with probability alpha at most; a j truly worse than b only
pulls its T_jb down. That is the subset-pivotality argument of the gate's joint correction (joint.py), applied with
b as the control of Dunnett's comparisons with a control, which is Hsu's device: since b is unknown, every variant
is tried as b and each gets its own critical value over the m - 1 others, with no correction across the m tries
(only the true best's test matters for coverage). With several variants tied at the best, each of them is covered with
probability at least 1 - alpha, so at least one is; all of them at once is not promised (the union bound gives
1 - t * alpha for t tied variants; the simulation in rag_eval_assets_tests/best_set_simulation.py measures it).

Hansen, Lunde & Nason's model confidence set (2011) with a max-T elimination rule was the alternative: it covers
all the tied best at once, but by a sequence of equivalence tests each with its own resampling (up to m - 1 rounds)
and with an asymptotic guarantee; MCB is one pass, finite-sample exact in the least favourable configuration under
sign-flip symmetry, and its p-value per variant answers the reader's question ("how surely does some other
variant beat this one?") directly. References: Hsu, J. C. (1984), "Constrained simultaneous confidence intervals for
multiple comparisons with the best", Annals of Statistics 12(3); Hsu (1996), "Multiple Comparisons: Theory and
Methods", chapter 4; Hansen, P. R., Lunde, A. & Nason, J. M. (2011), "The model confidence set", Econometrica
79(2), 453-497.

Identical variants (equal values on every question) are computed once, so they are in or out together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rag_eval_assets.verdict.signs import is_exact, p_from_counts, sign_blocks

# Standardised statistics are of order sqrt(n); equal ones computed in another order differ in the last bits.
TOLERANCE = 1e-9
# Flipped statistics held at once (patterns x variants x variants): bounds memory at 32 MiB whatever m.
CELLS = 4_000_000


@dataclass(frozen=True)
class BestSet:
    # per variant: the max-T p-value of "no other variant is better than this one"; 1 for one no other out-scores
    p_values: np.ndarray
    members: np.ndarray  # per variant: whether it may be the best at level alpha
    exact: bool  # True when every sign pattern of the questions that told variants apart was enumerated


def best_set(values: ArrayLike, *, alpha: float = 0.05, n_perm: int = 10000, seed: int = 0) -> BestSet:
    """The confidence set of the best of the columns of an (n questions, m variants) matrix of per-question values
    (higher is better, no NaN: the questions every variant scored) at level `alpha`; the mean of a column is what
    it is ranked on, so weighted means come in as weighted terms (gate.py weighted_terms)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 2 or np.isnan(x).any():
        raise ValueError(f"expected an (n, m) matrix without NaN, got shape {x.shape}")
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    if x.shape[1] == 0:
        return BestSet(np.ones(0), np.ones(0, dtype=bool), True)
    # Identical variants are one column: in or out together, whatever the arithmetic of the flips (+ 0.0: -0.0 is 0).
    seen: dict[bytes, int] = {}
    firsts = [seen.setdefault((x[:, j] + 0.0).tobytes(), j) for j in range(x.shape[1])]  # each column's first copy
    distinct = sorted(set(firsts))
    which = np.searchsorted(distinct, firsts)
    p, members, exact = _distinct_best_set(x[:, distinct], alpha=alpha, n_perm=n_perm, seed=seed)
    return BestSet(p[which], members[which], exact)


def _distinct_best_set(x: np.ndarray, *, alpha: float, n_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray, bool]:
    m = x.shape[1]
    if m == 1:
        return np.ones(1), np.ones(1, dtype=bool), True
    # Only the questions on which some variants differ carry a sign that matters.
    moved = x[np.ptp(x, axis=1) > 0]
    lead = _standardiser(moved)  # lead[j, i] * (sum_j - sum_i) = T_ji
    totals = moved.sum(axis=0)
    observed = _max_lead(totals[None, :], lead)[0]  # 0 for a variant no other out-scores on the mean
    extreme = np.zeros(m, dtype=np.int64)
    rows = max(1, CELLS // (m * m))
    for signs in sign_blocks(len(moved), n_perm, [seed, len(moved), 3]):
        flipped = signs @ moved
        for start in range(0, len(flipped), rows):
            extreme += np.count_nonzero(_max_lead(flipped[start:start + rows], lead) >= observed - TOLERANCE, axis=0)
    p = np.minimum(p_from_counts(extreme, len(moved), n_perm), 1.0)
    # With observed 0 every pattern is as extreme: p = 1, and the arg-max of the means is always in.
    return p, p > alpha, is_exact(len(moved), n_perm)


def _standardiser(moved: np.ndarray) -> np.ndarray:
    """(m, m) matrix of 1 / sqrt(sum_q (x_qj - x_qi)**2) at [j, i]; 0 on the diagonal and wherever the two never
    differ (distinct columns always do: the diagonal only)."""
    m = moved.shape[1]
    scale = np.empty((m, m))
    for i in range(m):  # one column at a time: n x m floats, not n x m x m
        scale[:, i] = np.sqrt(((moved - moved[:, [i]]) ** 2).sum(axis=0))
    return np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)


def _max_lead(sums: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """(b, m) per pattern and variant i: max(0, max over j != i of (sums_j - sums_i) * lead[j, i]), from (b, m) sums
    (the diagonal of `lead` is 0: i against itself is the 0)."""
    t = sums[:, :, None] - sums[:, None, :]
    t *= lead
    return t.max(axis=1)
