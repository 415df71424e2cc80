"""Paired tests for the change of a per-question metric between two runs over the same questions, and the interval
that belongs to each test.

The p-value comes from a sign-flip permutation test: under "no change", each question's difference cand - base is as
likely to have the opposite sign, so the observed mean difference is compared with the means of the differences under
random sign flips.

The interval is that test inverted (Hartigan 1969; Good, "Permutation Tests", 2005, section 3.4): the values mu for
which the sign-flip test of "the differences are symmetric about mu" does not reject at level alpha. It therefore
excludes 0 exactly when the test rejects, which a percentile bootstrap does not promise: with four moved questions out
of sixty, a bootstrap interval can exclude 0 beside p = 0.125. The bound nearer to 0 is searched from 0 itself, so the
agreement holds by construction; docs/runs.md has the details.

Everything works on the columns of (questions x metrics) matrices at once: one comparison holds a test per retriever,
k and metric, and drawing the sign patterns once per sample size is what keeps hundreds of tests cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rag_eval_assets.verdict.signs import is_exact, p_from_counts, sign_blocks

# Means computed in a different order differ in the last bits; a flip pattern whose |mean| equals the observed one
# within this tolerance counts as "at least as extreme".
TOLERANCE = 1e-12
# Bisection steps per interval bound: the bracket shrinks 2**-30 times, far below the 4 decimals shown.
BISECTIONS = 30
# Columns whose interval bounds are searched together: bounds memory at n_perm x COLUMNS floats.
COLUMNS = 256


@dataclass(frozen=True)
class PairedTest:
    n: int  # pairs with a value in both runs
    delta: float  # mean of cand - base
    ci_low: float  # the test inverted at `alpha`: -inf / +inf where the test could not reject any value on that side
    ci_high: float
    p_value: float  # two-sided; 1.0 when every difference is 0, NaN when there are no pairs
    exact: bool  # True when every sign pattern was enumerated


def paired_tests(
    base: ArrayLike, cand: ArrayLike, *, n_perm: int = 10000, seed: int = 0, alpha: float = 0.05
) -> list[PairedTest]:
    """One PairedTest per column of two (questions x m) matrices, rows being the same questions in both. Pairs with
    a NaN on either side are left out. A column's result does not depend on the other columns."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    if b.shape != c.shape or b.ndim != 2:
        raise ValueError(f"base and cand must be (n, m) matrices of equal shape, got {b.shape} and {c.shape}")
    diffs = c - b
    valid = ~np.isnan(diffs)
    counts = valid.sum(axis=0)
    tests: list[PairedTest | None] = [None] * b.shape[1]
    for n in np.unique(counts):
        columns = np.flatnonzero(counts == n)
        if n == 0:
            for j in columns:
                tests[j] = PairedTest(0, np.nan, np.nan, np.nan, np.nan, True)
            continue
        # Each column's own pairs, in row order: columns with as many pairs share the sign patterns.
        compact = np.column_stack([diffs[valid[:, j], j] for j in columns])
        p_values, exact = sign_flip_p_values(compact, n_perm=n_perm, seed=seed)
        low, high = inverted_intervals(compact, p_values, alpha=alpha, n_perm=n_perm, seed=seed)
        means = compact.mean(axis=0)
        for i, j in enumerate(columns):
            tests[j] = PairedTest(int(n), float(means[i]), float(low[i]), float(high[i]), float(p_values[i]), exact)
    return tests


def paired_test(
    base: ArrayLike, cand: ArrayLike, *, n_perm: int = 10000, seed: int = 0, alpha: float = 0.05
) -> PairedTest:
    """paired_tests of two 1-d arrays."""
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    if b.shape != c.shape or b.ndim != 1:
        raise ValueError(f"base and cand must be 1-d arrays of equal length, got shapes {b.shape} and {c.shape}")
    return paired_tests(b[:, None], c[:, None], n_perm=n_perm, seed=seed, alpha=alpha)[0]


def sign_flip_p_values(diffs: ArrayLike, *, n_perm: int = 10000, seed: int = 0) -> tuple[np.ndarray, bool]:
    """Two-sided p-value of the mean of each column of an (n, m) matrix of paired differences, and whether all of
    them are exact.

    A zero difference has no sign to flip, so only a column's non-zero differences matter. With 2**nonzero <= n_perm
    every sign pattern of those is enumerated and the p-value is exact (two questions that moved out of 66 give
    exactly 0.5). Otherwise `n_perm` random patterns are drawn (deterministically from `seed` and the column's
    number of non-zero differences).
    """
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2:
        raise ValueError(f"expected an (n, m) matrix, got shape {d.shape}")
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    n, m = d.shape
    if n == 0:
        return np.full(m, np.nan), True
    observed = np.abs(d.mean(axis=0)) - TOLERANCE
    nonzero = np.count_nonzero(d, axis=0)
    # A column with no change at all keeps p = 1: every pattern ties with the data.
    p_values = np.ones(m)
    all_exact = True
    # Columns with as many non-zero differences share their sign patterns.
    for count in map(int, np.unique(nonzero[observed > 0])):
        columns = np.flatnonzero((nonzero == count) & (observed > 0))
        moved = np.column_stack([d[d[:, j] != 0, j] for j in columns])
        extreme = np.zeros(len(columns), dtype=np.int64)
        for signs in sign_blocks(count, n_perm, [seed, count]):
            extreme += np.count_nonzero(np.abs(signs @ moved) / n >= observed[columns], axis=0)
        p_values[columns] = p_from_counts(extreme, count, n_perm)
        all_exact &= is_exact(count, n_perm)
    return p_values, all_exact


def inverted_intervals(
    diffs: np.ndarray, p_values: np.ndarray, *, alpha: float, n_perm: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The (1 - alpha) interval of each column's mean difference: {mu : the sign-flip test of the differences
    about mu has p >= alpha}, bounded by bisection between an accepted and a rejected value on each side.

    `p_values` are the columns' p-values at mu = 0 (sign_flip_p_values): 0 is a bracket end on its own side, kept as
    accepted when p >= alpha and as rejected otherwise, so the interval holds 0 exactly when the test does not
    reject. Away from 0 every question has a sign to flip, so all n of them are flipped (exactly when 2**n <=
    n_perm); one set of patterns serves every mu, which makes p(mu) a fixed function that the bisection can follow.
    """
    n, m = diffs.shape
    low, high = np.empty(m), np.empty(m)
    signs = np.vstack(list(sign_blocks(n, n_perm, [seed, n, 1])))
    for start in range(0, m, COLUMNS):
        part = slice(start, start + COLUMNS)
        low[part], high[part] = _invert(diffs[:, part], p_values[part], signs, alpha=alpha, n_perm=n_perm)
    return low, high


def _invert(d: np.ndarray, p0: np.ndarray, signs: np.ndarray, *, alpha: float, n_perm: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(d)
    flipped, flips = signs @ d, signs.sum(axis=1)  # sum_i s_i (d_i - mu) = flipped - mu * flips
    total = d.sum(axis=0)

    def accepted(mu: np.ndarray) -> np.ndarray:
        observed = np.abs(total - n * mu) - n * TOLERANCE
        extreme = np.count_nonzero(np.abs(flipped - mu * flips[:, None]) >= observed, axis=0)
        return p_from_counts(extreme, n, n_perm) >= alpha

    mean = total / n
    keep = p0 >= alpha
    # Beyond the data every difference has one sign: only the all-equal patterns tie, the test's smallest p.
    margin = 1e-9 * np.maximum(1.0, d.max(axis=0) - d.min(axis=0))
    bounds = []
    for side, edge in ((-1, d.min(axis=0)), (1, d.max(axis=0))):
        zero_here = side * (0.0 - mean) > 0
        rejected_zero = zero_here & ~keep
        inside = np.where(zero_here & keep, 0.0, mean)
        beyond = side * np.maximum(side * edge, side * inside) + side * margin
        outside = np.where(rejected_zero, 0.0, beyond)
        # 0 is taken as decided by its own p-value, never re-evaluated with these patterns.
        unbounded = ~rejected_zero & accepted(outside)
        for _ in range(BISECTIONS):
            mid = (inside + outside) / 2
            ok = accepted(mid)
            inside, outside = np.where(ok, mid, inside), np.where(ok, outside, mid)
        # p(mu) jumps at the means of subsets of the differences, where flipped sums tie with the data; with discrete
        # metrics such a point can be accepted while values just beside it are not. The bound is the rejected end
        # of the final bracket (2**-30 of the data's range wider), so that such a point is never lost, except
        # where that end is a rejected 0.
        bounds.append(np.where(unbounded, side * np.inf, np.where(rejected_zero, inside, outside)))
    low, high = bounds
    nan = np.isnan(p0)
    return np.where(nan, np.nan, low), np.where(nan, np.nan, high)
