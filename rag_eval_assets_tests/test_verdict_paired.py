"""The paired sign-flip permutation test and the interval that inverts it."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from rag_eval_assets.verdict.paired import paired_test, paired_tests, sign_flip_p_values


def sign_flip_p_value(diffs, **options) -> tuple[float, bool]:
    p_values, exact = sign_flip_p_values(np.asarray(diffs, dtype=float)[:, None], **options)
    return float(p_values[0]), exact


def test_exact_p_values_by_enumeration() -> None:
    # Three +1 differences: of the 8 sign patterns, +++ and --- are as extreme as the data.
    assert sign_flip_p_value([1.0, 1.0, 1.0]) == (0.25, True)
    assert sign_flip_p_value([0.5] * 5) == (2 / 32, True)
    # |mean| >= 2/4 for (+, +, +, -) needs at least three of the four signs to agree: 10 of 16 patterns.
    assert sign_flip_p_value([1.0, 1.0, 1.0, -1.0]) == (10 / 16, True)
    assert sign_flip_p_value([1.0, -1.0]) == (1.0, True)
    assert sign_flip_p_value([0.0, 0.0, 0.0]) == (1.0, True)


def test_monte_carlo_p_value_agrees_with_the_binomial_answer() -> None:
    # +-1 differences: |mean of flipped| >= |observed| iff |2B - n| >= |plus - minus| with B ~ Binomial(n, 1/2).
    n, plus = 30, 21
    diffs = np.array([1.0] * plus + [-1.0] * (n - plus))
    observed = abs(2 * plus - n)
    exact = sum(comb(n, b) for b in range(n + 1) if abs(2 * b - n) >= observed) / 2**n
    p, is_exact = sign_flip_p_value(diffs, n_perm=40000, seed=3)
    assert not is_exact and p == pytest.approx(exact, abs=0.005)
    assert sign_flip_p_value(diffs, n_perm=40000, seed=3) == (p, False)  # deterministic


def test_a_big_consistent_improvement_is_significant() -> None:
    rng = np.random.default_rng(0)
    base = (rng.random(80) < 0.4).astype(float)
    cand = base.copy()
    failures = np.flatnonzero(base == 0)
    cand[failures[:20]] = 1.0  # 20 of the failures now succeed, nothing is lost
    test = paired_test(base, cand)
    assert test.n == 80 and test.delta == pytest.approx(20 / 80)
    assert test.p_value < 0.001
    assert 0 < test.ci_low < test.delta < test.ci_high


def test_noise_is_not_significant() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(80)
    cand = base + rng.normal(0.0, 0.2, 80)
    test = paired_test(base, cand)
    assert test.p_value > 0.05
    assert test.ci_low < 0 < test.ci_high


def test_the_test_rejects_about_five_percent_of_null_samples() -> None:
    rng = np.random.default_rng(2)
    p_values = [sign_flip_p_value(rng.normal(0.0, 1.0, 25), n_perm=999, seed=s)[0] for s in range(300)]
    rate = np.mean(np.array(p_values) < 0.05)
    assert 0.02 <= rate <= 0.09


def test_pairs_with_a_missing_value_are_left_out() -> None:
    base = np.array([0.0, 0.0, np.nan, 1.0, 0.0, 0.0])
    cand = np.array([1.0, 1.0, 1.0, np.nan, 1.0, 1.0])
    test = paired_test(base, cand, seed=4)
    assert test.n == 4 and test.delta == 1.0 and test.exact
    assert test.p_value == 2 / 16
    # Four pairs can never reject at 0.05 (their smallest p is 2/16): no value of the mean is excluded.
    assert (test.ci_low, test.ci_high) == (-np.inf, np.inf)
    empty = paired_test([np.nan], [1.0])
    assert empty.n == 0 and np.isnan(empty.p_value) and np.isnan(empty.delta)
    with pytest.raises(ValueError, match="equal length"):
        paired_test([1.0, 2.0], [1.0])


def test_columns_get_the_same_result_alone_or_together() -> None:
    rng = np.random.default_rng(5)
    base = rng.random((40, 5))
    cand = base + rng.normal(0.05, 0.2, (40, 5))
    base[rng.random((40, 5)) < 0.2] = np.nan  # columns with different numbers of pairs
    together = paired_tests(base, cand, n_perm=3000, seed=9)
    for j in range(5):
        alone = paired_test(base[:, j], cand[:, j], n_perm=3000, seed=9)
        assert (together[j].n, together[j].p_value, together[j].exact) == (alone.n, alone.p_value, alone.exact)
        # The interval's matrix product may sum in another order: equal to the last bits.
        got = (together[j].delta, together[j].ci_low, together[j].ci_high)
        assert got == pytest.approx((alone.delta, alone.ci_low, alone.ci_high), rel=1e-12, abs=1e-15)
    assert len({t.n for t in together}) > 1


def test_unchanged_questions_do_not_blur_an_exact_test() -> None:
    # Two questions of 66 moved up by 1: only their signs can flip, so p is exactly 2 / 4, however many pairs tied.
    diffs = [1.0, 1.0] + [0.0] * 64
    assert sign_flip_p_value(diffs) == (0.5, True)
    many = np.r_[np.ones(20), np.zeros(100)]  # 2**20 patterns > n_perm: sampled over the moved ones only
    p, exact = sign_flip_p_value(many, n_perm=5000)
    assert not exact and p == pytest.approx(1 / 5001)


def test_p_values_equal_scipys_permutation_test() -> None:
    from scipy import stats

    rng = np.random.default_rng(11)
    for n in (5, 9, 12):
        base, cand = rng.random(n), rng.random(n)
        expected = stats.permutation_test((cand, base), lambda x, y: np.mean(x - y), permutation_type="samples",
                                          n_resamples=np.inf, alternative="two-sided").pvalue
        assert paired_test(base, cand).p_value == pytest.approx(expected, abs=1e-12)


def test_four_moved_questions_give_an_interval_that_holds_zero() -> None:
    # The case a percentile bootstrap got wrong: four of sixty questions moved up, p = 2/16 = 0.125.
    diffs = np.r_[[0.5, 1.0, 0.25, 0.5], np.zeros(56)]
    test = paired_test(np.zeros(60), diffs)
    assert test.p_value == 0.125 and test.ci_low <= 0 <= test.ci_high


def _cases(rng: np.random.Generator):
    """Paired samples of every kind the gate sees: few or many questions, few moved, discrete or continuous."""
    for _ in range(400):
        n = int(rng.choice([4, 6, 9, 15, 30, 60]))
        kind = rng.integers(4)
        if kind == 0:  # hit@k: 0/1 values
            base, cand = (rng.random(n) < 0.5).astype(float), (rng.random(n) < rng.uniform(0.2, 0.8)).astype(float)
        elif kind == 1:  # few moved questions among many unchanged
            base = rng.random(n)
            cand = base.copy()
            moved = rng.choice(n, size=min(n, int(rng.integers(1, 6))), replace=False)
            cand[moved] += rng.choice([-0.5, 0.25, 0.5, 1.0], size=len(moved))
        elif kind == 2:  # nDCG-like discrete values
            levels = np.array([0.0, 0.39, 0.5, 0.63, 1.0])
            base, cand = rng.choice(levels, n), rng.choice(levels, n)
        else:
            base = rng.random(n)
            cand = base + rng.normal(rng.uniform(-0.2, 0.2), 0.2, n)
        yield base, cand


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.01])
def test_the_interval_excludes_zero_exactly_when_the_test_rejects(alpha: float) -> None:
    rng = np.random.default_rng(int(alpha * 1000))
    rejected = 0
    for base, cand in _cases(rng):
        test = paired_test(base, cand, n_perm=2000, alpha=alpha)
        excludes_zero = test.ci_low > 0 or test.ci_high < 0
        assert excludes_zero == (test.p_value < alpha), (base, cand, test)
        assert test.ci_low <= test.delta <= test.ci_high or test.p_value < alpha
        rejected += excludes_zero
    assert 20 < rejected < 380  # both decisions were exercised


@pytest.mark.parametrize("noise", ["normal", "discrete"])
def test_the_interval_covers_the_true_shift(noise: str) -> None:
    # Differences symmetric about a known mean mu (the inverted test's model): a 95% interval covers mu about 95%
    # of the time, on continuous and on three-valued differences.
    rng = np.random.default_rng(3)
    reps, n, mu = 600, 20, 0.15
    covered, widths = 0, []
    for rep in range(reps):
        error = rng.normal(0, 0.3, n) if noise == "normal" else rng.choice([-0.4, 0.0, 0.4], n)
        test = paired_test(np.zeros(n), mu + error, n_perm=2000, seed=rep)
        covered += test.ci_low <= mu <= test.ci_high
        widths.append(test.ci_high - test.ci_low)
    coverage = covered / reps
    print(f"{noise}: coverage {coverage:.3f}, mean width {np.mean(widths):.3f}")
    assert 0.93 <= coverage <= 0.985
