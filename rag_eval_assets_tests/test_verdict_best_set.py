"""The confidence set of the best (verdict/best_set.py): its max-T p-values against a brute-force loop over the sign
patterns, identical variants in or out together, and the simulation with a known best among 5, 20 and 50 variants:
the set holds a true best in at least 1 - alpha of repetitions (within the binomial's noise), also when several tie
at the top, and shrinks as questions are added and as the gap widens, while the arg-max of the means often names a
variant that is not the best (best_set_simulation.py; the figures in docs/runs.md come from benchmarks/best_set.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom

from rag_eval_assets.verdict.best_set import best_set
from rag_eval_assets.verdict.signs import sign_blocks
from rag_eval_assets_tests.best_set_simulation import simulate

ALPHA = 0.05
REPETITIONS = 200
# The most misses of a true best that REPETITIONS repetitions at coverage exactly 1 - alpha give but once in 1,000.
MOST_MISSES = int(binom.ppf(0.999, REPETITIONS, ALPHA))
# Sizes are compared on fewer repetitions: they differ by far more than their noise.
SHRINK_REPETITIONS = 30
SHRINK_MOST_MISSES = int(binom.ppf(0.999, SHRINK_REPETITIONS, ALPHA))


def _brute_force_p(x: np.ndarray, patterns: list[np.ndarray], *, counts_identity: bool) -> list[float]:
    """Per variant i, written out loop by loop: the share of patterns whose largest standardised lead of another
    variant over i (0 when none leads) reaches the observed one (the data's own pattern counted once when drawn)."""
    n, m = x.shape

    def largest_lead(i: int, signs: np.ndarray) -> float:
        leads = [0.0]
        for j in range(m):
            if j != i:
                d = [x[q, j] - x[q, i] for q in range(n)]
                scale = math.sqrt(sum(v * v for v in d))
                leads.append(0.0 if scale == 0 else sum(s * v for s, v in zip(signs, d)) / scale)
        return max(leads)

    p = []
    for i in range(m):
        observed = largest_lead(i, np.ones(n))
        count = sum(largest_lead(i, s) >= observed - 1e-9 for s in patterns)
        p.append(count / len(patterns) if counts_identity else (1 + count) / (1 + len(patterns)))
    return p


def test_the_p_values_are_the_max_t_over_every_sign_pattern_written_out() -> None:
    rng = np.random.default_rng(3)
    # Eight questions, four variants, one of them never different from another on two questions.
    x = rng.choice([0.0, 0.5, 1.0], size=(8, 4))
    x[:2, 3] = x[:2, 2]
    every = [np.array(s, dtype=float) for s in itertools.product([1.0, -1.0], repeat=8)]
    result = best_set(x, alpha=ALPHA)
    assert result.exact
    assert result.p_values == pytest.approx(_brute_force_p(x, every, counts_identity=True), abs=1e-12)


def test_drawn_patterns_give_the_written_out_p_values_over_the_same_patterns() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, (25, 5)) + np.array([0.3, 0.25, 0.0, -0.2, 0.1])
    n_perm, seed = 300, 7
    patterns = list(np.vstack(list(sign_blocks(25, n_perm, [seed, 25, 3]))))
    result = best_set(x, alpha=ALPHA, n_perm=n_perm, seed=seed)
    assert not result.exact
    assert result.p_values == pytest.approx(_brute_force_p(x, patterns, counts_identity=False), abs=1e-12)
    # The set is the variants with p > alpha; the highest mean has p = 1.
    assert list(result.members) == [p > ALPHA for p in result.p_values] and 0 < sum(result.members) < 5
    assert result.p_values[int(np.argmax(x.mean(axis=0)))] == 1.0


def test_identical_variants_are_in_or_out_together_and_one_variant_is_its_own_set() -> None:
    rng = np.random.default_rng(5)
    base = rng.normal(0, 1, 60)
    x = np.column_stack([base + 0.6, base + 0.6, base + rng.normal(0, 0.3, 60), base + rng.normal(0, 0.3, 60),
                         base - 0.5])
    x[:, 3] = x[:, 2]  # a copy of the third
    result = best_set(x, alpha=ALPHA, n_perm=2000)
    assert result.p_values[0] == result.p_values[1] and result.p_values[2] == result.p_values[3]
    assert list(result.members) == [True, True, False, False, False]
    # However many copies: the same answer.
    assert list(best_set(x[:, [0, 2, 4]], alpha=ALPHA, n_perm=2000).members) == [True, False, False]
    alone = best_set(x[:, :1], alpha=ALPHA)
    assert list(alone.members) == [True] and list(alone.p_values) == [1.0]
    # Variants that never differ are one variant: alone in the set.
    assert list(best_set(x[:, :2], alpha=ALPHA).members) == [True, True]


@pytest.mark.parametrize("model", ["normal", "ndcg"])
@pytest.mark.parametrize("m", [5, 20, 50])
def test_every_variant_tied_at_the_best_is_covered_at_least_1_minus_alpha_of_the_time(model: str, m: int) -> None:
    """All m variants equal: the least favourable configuration, where coverage is tightest."""
    outcome = simulate(model, m, 60, 0.0, m, REPETITIONS, alpha=ALPHA, n_perm=300)
    misses = round((1 - outcome.covered) * REPETITIONS)
    print(model, m, outcome)
    assert misses <= MOST_MISSES, outcome
    assert outcome.covered_any == 1.0  # the highest mean is always in


@pytest.mark.parametrize("m", [5, 20, 50])
def test_three_tied_best_are_each_covered_and_the_set_shrinks_with_questions_and_gaps(m: int) -> None:
    tied = simulate("ndcg", m, 100, 0.1, 3, REPETITIONS, alpha=ALPHA, n_perm=300)
    print("tied", m, tied)
    assert round((1 - tied.covered) * REPETITIONS) <= MOST_MISSES, tied
    sizes = {}
    for n, gap in ((50, 0.1), (200, 0.1), (800, 0.1), (200, 0.05), (200, 0.2)):
        outcome = simulate("ndcg", m, n, gap, 1, SHRINK_REPETITIONS, alpha=ALPHA, n_perm=300)
        print(m, n, gap, outcome)
        assert round((1 - outcome.covered) * SHRINK_REPETITIONS) <= SHRINK_MOST_MISSES, outcome
        sizes[n, gap] = outcome.size
    assert sizes[50, 0.1] > sizes[200, 0.1] > sizes[800, 0.1]
    assert sizes[200, 0.05] > sizes[200, 0.1] > sizes[200, 0.2]
    # With many close variants and few questions the arg-max of the means often picks a variant that is not the
    # best; the set holds the best all the same.
    few = simulate("ndcg", m, 50, 0.1, 1, SHRINK_REPETITIONS, alpha=ALPHA, n_perm=300)
    assert few.argmax_wrong > {5: 0.2, 20: 0.4, 50: 0.5}[m] and few.covered >= 0.9, few
