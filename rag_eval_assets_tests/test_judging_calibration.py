"""Calibrated (prediction-powered) judge means (judging/calibration.py): a case worked by hand, lam = 0 giving the
human-only interval exactly, the run difference, and a simulation with a known truth in which the calibrated
interval covers it and the naive judge interval does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rag_eval_assets.judging.calibration import (
    MeanEstimate,
    calibrated_mean,
    human_mean,
    judge_mean,
    mean_difference,
    within_scale,
)
from rag_eval_assets_tests.judge_simulation import (
    GRADED,
    JUDGES,
    NEAR_CONSTANT_GRADED,
    NEAR_CONSTANT_SHARES,
    coverage,
    difference_rejections,
    equal_grades_coverage,
    equal_grades_differences,
)

NAN = float("nan")


def test_a_calibrated_mean_worked_by_hand() -> None:
    # Judge f = 2 4 3 5 2 5 on N = 6 answers; the person graded the first n = 3: Y = 3 4 4; m = 3 ungraded.
    #   mean Y = 11/3, mean f graded = 3, mean f ungraded = 4.
    #   Cov(Y, f) graded: deviations (-2/3, 1/3, 1/3) and (-1, 1, 0): (2/3 + 1/3 + 0) / 2 = 1/2.
    #   Var(f) over all six: mean 3.5, squares 2.25 .25 .25 2.25 2.25 2.25 = 9.5, / 5 = 1.9.
    #   lam = (1/2) / ((1 + 3/3) * 1.9) = 5/38.
    #   theta = lam * 4 + (11/3 - lam * 3) = 11/3 + 5/38 = 433/114.
    #   Var(Y - lam f) graded = Var(Y) - 2 lam Cov + lam^2 Var_graded(f) = 1/3 - 5/38 + 25/1444 = 949/4332.
    #   That is below the floor of three values one point apart, 1/3 (equal grades get no zero width), so 1/3.
    #   lam was fitted to these three grades: their residual variance with ddof 2, (1/3) * 2 / 1 = 2/3.
    #   se^2 = lam^2 * 1.9 / 3 + (2/3) / 3 = 142.5/12996 + 2888/12996 = 3030.5/12996.
    #   interval: theta -+ t(0.975, df 1) * se.
    judge = [2, 4, 3, 5, 2, 5]
    grades = [3, 4, 4, NAN, NAN, NAN]
    result = calibrated_mean(judge, grades, judge_from=3)
    se = math.sqrt(3030.5 / 12996)
    half = stats.t.ppf(0.975, 1) * se
    assert result.lam == pytest.approx(5 / 38)
    assert result.estimate == pytest.approx(433 / 114)
    assert result.se == pytest.approx(se)
    assert (result.low, result.high) == pytest.approx((433 / 114 - half, 433 / 114 + half))
    assert (result.df, result.n_graded, result.n_answers) == (1.0, 3, 6)
    # Below judge_from (by default JUDGE_FROM = 30) the judge is left out: the grades' own mean and interval.
    assert calibrated_mean(judge, grades) == calibrated_mean(judge, grades, judge_from=4)
    assert vars(calibrated_mean(judge, grades, judge_from=4)) == {**vars(human_mean(grades)), "lam": 0.0,
                                                                  "n_graded": 3, "n_answers": 6}


def test_the_naive_and_human_only_means_worked_by_hand() -> None:
    # Judge 1 2 3 4: mean 2.5, variance (2.25 + .25 + .25 + 2.25) / 3 = 5/3, se = sqrt(5/12), t with 3 df.
    naive = judge_mean([1, 2, 3, 4])
    half = stats.t.ppf(0.975, 3) * math.sqrt(5 / 12)
    assert (naive.estimate, naive.df) == (2.5, 3.0)
    assert (naive.low, naive.high) == pytest.approx((2.5 - half, 2.5 + half))
    # Grades 2 4 (the rest not graded): mean 3, variance 2, se 1, t with 1 df.
    human = human_mean([2, NAN, 4, NAN])
    assert (human.estimate, human.se, human.df) == (3.0, 1.0, 1.0)
    assert human.high == pytest.approx(3 + stats.t.ppf(0.975, 1))
    assert judge_mean([1, 2, 3, 4], alpha=0.1).high == pytest.approx(2.5 + stats.t.ppf(0.95, 3) * math.sqrt(5 / 12))


def test_a_judge_clipped_at_lam_one() -> None:
    # Grades are 3 times the judge's deviation: Cov = 3 Var, lam = 3 / (1 + n/m) > 1, clipped to 1, so
    # theta = mean f ungraded + mean (Y - f) graded = 2 + (mean Y - mean f graded).
    judge = [1, 2, 3, 1, 2, 3]
    grades = [0, 3, 6, NAN, NAN, NAN]
    result = calibrated_mean(judge, grades, judge_from=3)
    assert result.lam == 1.0
    assert result.estimate == pytest.approx(2 + (3 - 2))
    # se^2 = 1^2 Var(f) / 3 + Var(Y - f) / 3 = (0.8 / 3) + (Var(-1, 1, 3) with ddof 2 = 8) / 3
    assert result.se == pytest.approx(math.sqrt(0.8 / 3 + 8 / 3))


def test_lam_zero_is_exactly_the_human_only_interval() -> None:
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 6, 80).astype(float)
    grades = truth.copy()
    grades[rng.permutation(80)[:50]] = np.nan  # graded: 30 answers, not the first ones
    cases = {
        "reversed judge (negative covariance)": 5 - truth,
        "constant judge": np.full(80, 3.0),
        "every answer graded": truth,
    }
    for name, judge in cases.items():
        g = truth if name == "every answer graded" else grades
        result = calibrated_mean(judge, g)
        expected = human_mean(g)
        assert result.lam == 0.0, name
        assert (result.estimate, result.se, result.low, result.high, result.df) == (
            expected.estimate, expected.se, expected.low, expected.high, expected.df), name
    assert human_mean(grades).estimate == pytest.approx(float(np.nanmean(grades)))


def test_one_grade_gives_an_estimate_without_an_interval() -> None:
    result = calibrated_mean([1, 2, 3], [2, NAN, NAN])
    assert (result.estimate, result.lam) == (2.0, 0.0)
    assert math.isnan(result.se) and math.isnan(result.low) and math.isnan(result.high)


def test_a_batch_is_each_run_computed_alone() -> None:
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 6, (20, 60)).astype(float)
    judge = np.clip(truth + rng.integers(-1, 3, truth.shape), 0, 5)
    grades = np.where(rng.random(truth.shape) < rng.uniform(0.1, 0.9, (20, 1)), truth, np.nan)
    batch = calibrated_mean(judge, grades)
    for row in range(20):
        alone = calibrated_mean(judge[row], grades[row])
        for field in ("estimate", "se", "low", "high", "df", "lam", "n_graded", "n_answers"):
            assert getattr(batch, field)[row] == pytest.approx(getattr(alone, field), rel=1e-12), (row, field)
    assert judge_mean(judge).high[4] == pytest.approx(judge_mean(judge[4]).high)
    assert human_mean(grades).low[9] == pytest.approx(human_mean(grades[9]).low)


def test_bad_inputs_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"judge: every answer needs a finite score; answer 1 \(run 0\) has nan"):
        calibrated_mean([1, NAN, 3], [1, 2, NAN])
    with pytest.raises(ValueError, match="must be the same answers in the same order"):
        calibrated_mean([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="grades: no graded answer"):
        calibrated_mean([1, 2, 3], [NAN, NAN, NAN])
    with pytest.raises(ValueError, match="grades: infinite grade"):
        human_mean([1, float("inf")])
    with pytest.raises(ValueError, match=r"alpha must lie in \(0, 1\), got 1.5"):
        judge_mean([1, 2], alpha=1.5)
    with pytest.raises(ValueError, match=r"expected one run's scores \(1-D\) or one run per row \(2-D\)"):
        judge_mean([])


def test_a_difference_worked_by_hand() -> None:
    # current 3.0 (se 0.3, 10 grades: df 9) - baseline 2.5 (se 0.4, df 19): 0.5, se = sqrt(0.09 + 0.16) = 0.5, t = 1,
    # Welch df = 0.25^2 / (0.09^2 / 9 + 0.16^2 / 19) = 27.8103, p = 2 (1 - T(1; 27.81)) = 0.3259,
    # interval 0.5 -+ t(0.975; 27.81) * 0.5 = 0.5 -+ 1.0245.
    current = MeanEstimate(estimate=3.0, se=0.3, low=NAN, high=NAN, df=9.0)
    baseline = MeanEstimate(estimate=2.5, se=0.4, low=NAN, high=NAN, df=19.0)
    d = mean_difference(current, baseline)
    assert (d.estimate, d.se, d.t, d.df) == pytest.approx((0.5, 0.5, 1.0, 27.81030445))
    assert d.p_value == pytest.approx(0.3259325876)
    assert (d.low, d.high) == pytest.approx((0.5 - 1.0245184004, 0.5 + 1.0245184004))
    # Infinite degrees of freedom on both sides: the normal z test, 2 (1 - Phi(1)) = 0.3173, 0.5 -+ 1.96 * 0.5.
    normal = mean_difference(MeanEstimate(3.0, 0.3, NAN, NAN, math.inf), MeanEstimate(2.5, 0.4, NAN, NAN, math.inf))
    assert (normal.df, normal.p_value) == (math.inf, pytest.approx(0.3173105078629141))
    assert (normal.low, normal.high) == pytest.approx((0.5 - 0.9799819922, 0.5 + 0.9799819922))
    certain = mean_difference(MeanEstimate(3.0, 0.0, 3.0, 3.0, 1.0), MeanEstimate(2.0, 0.0, 2.0, 2.0, 1.0))
    assert (certain.t, certain.p_value, certain.low, certain.high) == (math.inf, 0.0, 1.0, 1.0)
    same = mean_difference(MeanEstimate(3.0, 0.0, 3.0, 3.0, 1.0), MeanEstimate(3.0, 0.0, 3.0, 3.0, 1.0))
    assert (same.t, same.p_value) == (0.0, 1.0)


def test_a_difference_interval_excludes_zero_exactly_when_p_is_below_alpha() -> None:
    rng = np.random.default_rng(9)
    for alpha in (0.05, 0.1):
        truth = rng.integers(0, 6, (400, 2, 40)).astype(float)
        grades = np.where(rng.random(truth.shape) < 0.5, truth, np.nan)
        judge = np.clip(truth + rng.integers(-1, 2, truth.shape), 0, 5)
        d = mean_difference(calibrated_mean(judge[:, 0], grades[:, 0]), calibrated_mean(judge[:, 1], grades[:, 1]),
                            alpha=alpha)
        assert np.array_equal((d.low > 0) | (d.high < 0), d.p_value < alpha)
        assert 0 < (d.p_value < alpha).sum() < 400


def test_simulation_calibrated_intervals_cover_the_truth_and_naive_ones_do_not() -> None:
    rows = {(r.judge, r.n_graded, r.method): r for r in coverage(repetitions=2000, seed=0)}
    assert len(rows) == len(JUDGES) * len(GRADED) * 3
    for judge in JUDGES:
        for n in GRADED:
            calibrated, naive, human = (rows[judge, n, m] for m in ("calibrated", "naive", "human_only"))
            assert calibrated.coverage >= 0.93, calibrated
            assert human.coverage >= 0.93, human
            # Power tuning never costs width; with a judge that knows something it saves a lot.
            assert calibrated.mean_width <= human.mean_width * 1.02, (calibrated, human)
            if judge != "pure_noise":
                assert calibrated.mean_width < 0.75 * human.mean_width, (calibrated, human)
            if judge != "unbiased_noisy":
                assert naive.coverage < 0.2, naive


def test_simulation_differences_alarm_on_real_changes_only() -> None:
    # No change, the same biased judge: about alpha false alarms.
    same = difference_rejections("one_point_high", "one_point_high", better=False, n_graded=100, repetitions=2000)
    assert same["calibrated"] <= 0.06
    # No change in the answers, but the judge turned one point more generous: the naive means alarm almost always,
    # the calibrated ones no more than alpha.
    drift = difference_rejections("unbiased_noisy", "one_point_high", better=False, n_graded=100, repetitions=2000)
    assert drift["calibrated"] <= 0.06 and drift["naive"] > 0.9
    # The answers really got better (+0.5): found nearly always.
    better = difference_rejections("one_point_high", "one_point_high", better=True, n_graded=100, repetitions=2000)
    assert better["calibrated"] >= 0.9


def test_intervals_cut_to_the_scale_cover_as_often_and_never_leave_it() -> None:
    # Runs whose truth sits near the bottom of the scale (most grades 0, as after a bad change), 12 grades a run:
    # the t interval of the grades reaches below 0 most of the time; cut to 0-5 it covers the true mean exactly as
    # often, since that mean lies on the scale too.
    rng = np.random.default_rng(4)
    truth = rng.choice(6, p=(0.85, 0.15, 0, 0, 0, 0), size=(4000, 150)).astype(float)
    grades = np.where(np.arange(150) < 12, truth, np.nan)
    for estimate in (calibrated_mean(np.full(truth.shape, 3.0), grades), judge_mean(np.clip(truth + 1, 0, 5))):
        cut = within_scale(estimate, 0, 5)
        for true_mean in (0.15, float(np.clip(truth + 1, 0, 5).mean())):
            raw_cover = (estimate.low <= true_mean) & (true_mean <= estimate.high)
            assert np.array_equal((cut.low <= true_mean) & (true_mean <= cut.high), raw_cover)
        assert (cut.low >= 0).all() and (cut.high <= 5).all() and (cut.high - cut.low <= estimate.high - estimate.low
                                                                   + 1e-12).all()
    assert (calibrated_mean(np.full(truth.shape, 3.0), grades).low < 0).mean() > 0.5


def test_equal_grades_give_an_interval_one_disagreement_wide_that_covers() -> None:
    # n equal grades: the variance one grade a point off would give, 1/n (ddof 1), so se = 1/n, not 0.
    for n in (2, 10, 12):
        human = human_mean([0.0] * n + [NAN] * 5)
        assert (human.estimate, human.se) == (0.0, pytest.approx(1 / n))
        assert human.high == pytest.approx(stats.t.ppf(0.975, n - 1) / n)
    # A sample that varies keeps its own variance: 0 0 1 has 1/3, the floor itself; 0 2 4 has 4.
    assert human_mean([0.0, 0.0, 1.0]).se == pytest.approx(math.sqrt((1 / 3) / 3))
    assert human_mean([0.0, 2.0, 4.0]).se == pytest.approx(math.sqrt(4 / 3))
    # The simulation: nearly all true grades 0 (a share 1-10% graded 1), 10-30 grades a run, 4,000 runs a case.
    # Before the floor the t interval covered 10-96% of the time here (all-equal grades: zero width).
    alpha, repetitions = 0.05, 4000
    mc_error = 3 * math.sqrt(alpha * (1 - alpha) / repetitions)
    rows = equal_grades_coverage(repetitions, seed=0)
    assert len(rows) == len(NEAR_CONSTANT_GRADED) * len(NEAR_CONSTANT_SHARES)
    assert max(r.all_equal for r in rows) > 0.85  # the regime: most runs' grades all equal
    for r in rows:
        assert r.calibrated >= 1 - alpha - mc_error and r.human_only >= 1 - alpha - mc_error, r
        assert r.never_zero_width, r


def test_the_gate_difference_of_equal_grades_keeps_alpha_and_agrees_with_its_interval() -> None:
    same, drop = equal_grades_differences(n_graded=12, repetitions=2000)
    for d in (same, drop):
        assert (np.asarray(d.se) > 0).all()
        assert np.array_equal((d.low > 0) | (d.high < 0), d.p_value < 0.05)
    assert (same.p_value < 0.05).mean() <= 0.05  # both runs all 0: no change found
    assert (drop.p_value < 0.05).mean() == 1.0  # all 1 to all 0: found every time
