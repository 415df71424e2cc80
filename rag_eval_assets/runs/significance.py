"""Paired tests for the change of a per-question metric between two runs over the same questions.

The p-value comes from a sign-flip permutation test: under "no change", each question's difference cand - base is as
likely to have the opposite sign, so the observed mean difference is compared with the means of the differences under
random sign flips. The interval is a paired percentile bootstrap of the mean difference (metrics/stats.py).

Everything works on the columns of (questions x metrics) matrices at once: one comparison holds a test per retriever,
k and metric, and drawing the sign patterns once per sample size is what keeps hundreds of tests cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rag_eval_assets.metrics.stats import bootstrap_ci_columns

# Sign patterns drawn per matrix product: bounds memory at BLOCK x n floats whatever n_perm is.
BLOCK = 2048
# Means computed in a different order differ in the last bits; a flip pattern whose |mean| equals the observed one
# within this tolerance counts as "at least as extreme".
TOLERANCE = 1e-12


@dataclass(frozen=True)
class PairedTest:
    n: int  # pairs with a value in both runs
    delta: float  # mean of cand - base
    ci_low: float
    ci_high: float
    p_value: float  # two-sided; 1.0 when every difference is 0, NaN when there are no pairs
    exact: bool  # True when every sign pattern was enumerated


def paired_tests(
    base: ArrayLike, cand: ArrayLike, *, n_perm: int = 10000, n_boot: int = 1000, seed: int = 0
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
        # Each column's own pairs, in row order: columns with as many pairs share the resamples and sign patterns.
        compact = np.column_stack([diffs[valid[:, j], j] for j in columns])
        low, high = bootstrap_ci_columns(compact, n_boot, seed)
        p_values, exact = sign_flip_p_values(compact, n_perm=n_perm, seed=seed)
        means = compact.mean(axis=0)
        for i, j in enumerate(columns):
            tests[j] = PairedTest(int(n), float(means[i]), float(low[i]), float(high[i]), float(p_values[i]), exact)
    return tests


def paired_test(
    base: ArrayLike, cand: ArrayLike, *, n_perm: int = 10000, n_boot: int = 1000, seed: int = 0
) -> PairedTest:
    """paired_tests of two 1-d arrays."""
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    if b.shape != c.shape or b.ndim != 1:
        raise ValueError(f"base and cand must be 1-d arrays of equal length, got shapes {b.shape} and {c.shape}")
    return paired_tests(b[:, None], c[:, None], n_perm=n_perm, n_boot=n_boot, seed=seed)[0]


def sign_flip_p_values(diffs: ArrayLike, *, n_perm: int = 10000, seed: int = 0) -> tuple[np.ndarray, bool]:
    """Two-sided p-value of the mean of each column of an (n, m) matrix of paired differences, and whether all of
    them are exact.

    A zero difference has no sign to flip, so only a column's non-zero differences matter. With 2**nonzero <= n_perm
    every sign pattern of those is enumerated and the p-value is exact (two questions that moved out of 66 give
    exactly 0.5). Otherwise `n_perm` random patterns are drawn (deterministically from `seed` and the column's
    number of non-zero differences) and p = (1 + extreme) / (1 + n_perm), which never reports 0 for a finite sample
    (Phipson & Smyth 2010).
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
    p_values = np.ones(m)
    all_exact = True
    # Columns with as many non-zero differences share their sign patterns.
    for count in map(int, np.unique(nonzero[observed > 0])):
        columns = np.flatnonzero((nonzero == count) & (observed > 0))
        moved = np.column_stack([d[d[:, j] != 0, j] for j in columns])
        if 2**count <= n_perm:
            patterns = ((np.arange(2**count)[:, None] >> np.arange(count)) & 1) * 2.0 - 1.0
            extreme = np.count_nonzero(np.abs(patterns @ moved) / n >= observed[columns], axis=0)
            p_values[columns] = extreme / 2**count
            continue
        all_exact = False
        rng = np.random.default_rng([seed, count])
        extreme = np.zeros(len(columns), dtype=np.int64)
        for start in range(0, n_perm, BLOCK):
            size = min(BLOCK, n_perm - start)
            # Eight signs per random byte: drawing the patterns costs less than multiplying with them.
            bits = np.unpackbits(rng.integers(0, 256, size=(size, (count + 7) // 8), dtype=np.uint8), axis=1,
                                 count=count)
            extreme += np.count_nonzero(np.abs((bits * 2.0 - 1.0) @ moved) / n >= observed[columns], axis=0)
        p_values[columns] = (1 + extreme) / (1 + n_perm)
    # A column with no change at all keeps p = 1: every pattern ties with the data.
    return p_values, all_exact
