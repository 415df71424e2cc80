"""Synthetic judged runs with a known true mean, to measure how often each interval of judging/calibration.py covers
it. Shared by test_judging_calibration.py (the assertions) and benchmarks/judge_calibration.py (the table in
docs/metrics.md).

A run: ANSWERS answers whose true (person's) grades are drawn from GRADE_PROBABILITIES over 0-5, so the truth is
TRUE_MEAN; a judge scores every answer; the person grades the first n, which is a random sample since the answers
are drawn independently. Every function draws `repetitions` runs at once, one run a row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_eval_assets.judging.calibration import (
    Difference,
    calibrated_mean,
    human_mean,
    judge_mean,
    mean_difference,
    within_scale,
)

GRADE_PROBABILITIES = (0.05, 0.10, 0.15, 0.25, 0.25, 0.20)
TRUE_MEAN = float(np.dot(range(6), GRADE_PROBABILITIES))  # 3.15
# A better run: the mean moves up by 0.5 (to 3.65).
BETTER_PROBABILITIES = (0.02, 0.05, 0.10, 0.23, 0.30, 0.30)
ANSWERS = 500
GRADED = (30, 100, 200)
# unbiased_noisy: the grade, one point off either way a quarter of the time each (then clipped to the scale, which
# biases it a little at the ends: its mean is 3.1125); pure_noise: uniform 0-5 whatever the answer; one_point_high:
# unbiased_noisy plus one, clipped.
JUDGES = ("unbiased_noisy", "pure_noise", "one_point_high")


@dataclass(frozen=True)
class Coverage:
    judge: str
    n_graded: int
    method: str  # calibrated, naive (the judge's mean) or human_only
    coverage: float  # share of runs whose 95% interval holds TRUE_MEAN
    mean_width: float


def synthetic_runs(judge: str, n_graded: int, repetitions: int, rng: np.random.Generator,
                   probabilities: tuple[float, ...] = GRADE_PROBABILITIES) -> tuple[np.ndarray, np.ndarray]:
    """(judge scores, grades with NaN where not graded), each (repetitions, ANSWERS)."""
    truth = rng.choice(6, p=probabilities, size=(repetitions, ANSWERS)).astype(float)
    off = rng.choice([-1.0, 0.0, 1.0], p=[0.25, 0.5, 0.25], size=truth.shape)
    if judge == "unbiased_noisy":
        scores = np.clip(truth + off, 0, 5)
    elif judge == "pure_noise":
        scores = rng.integers(0, 6, size=truth.shape).astype(float)
    elif judge == "one_point_high":
        scores = np.clip(truth + 1 + off, 0, 5)
    else:
        raise ValueError(f"unknown judge {judge!r}; known: {JUDGES}")
    grades = truth.copy()
    grades[:, n_graded:] = np.nan
    return scores, grades


def coverage(repetitions: int, seed: int = 0) -> list[Coverage]:
    """Every judge x GRADED x interval: how often it covers TRUE_MEAN, and its mean width."""
    rng = np.random.default_rng(seed)
    rows = []
    for judge in JUDGES:
        for n in GRADED:
            scores, grades = synthetic_runs(judge, n, repetitions, rng)
            for method, estimate in (("calibrated", calibrated_mean(scores, grades)),
                                     ("naive", judge_mean(scores)), ("human_only", human_mean(grades))):
                covered = (estimate.low <= TRUE_MEAN) & (TRUE_MEAN <= estimate.high)
                rows.append(Coverage(judge, n, method, float(covered.mean()),
                                     float((estimate.high - estimate.low).mean())))
    return rows


def difference_rejections(baseline_judge: str, current_judge: str, better: bool, n_graded: int, repetitions: int,
                          seed: int = 0) -> dict[str, float]:
    """Share of pairs of runs (baseline, current) whose difference is significant at 0.05, by the calibrated
    estimates and by the naive judge means. better: the current run's true grades come from BETTER_PROBABILITIES."""
    rng = np.random.default_rng(seed)
    base_scores, base_grades = synthetic_runs(baseline_judge, n_graded, repetitions, rng)
    current = BETTER_PROBABILITIES if better else GRADE_PROBABILITIES
    cur_scores, cur_grades = synthetic_runs(current_judge, n_graded, repetitions, rng, current)
    calibrated = mean_difference(calibrated_mean(cur_scores, cur_grades), calibrated_mean(base_scores, base_grades))
    naive = mean_difference(judge_mean(cur_scores), judge_mean(base_scores))
    return {"calibrated": float((calibrated.p_value < 0.05).mean()), "naive": float((naive.p_value < 0.05).mean())}


# Runs after a bad change: nearly every answer's true grade is 0, a `share` of them 1, so that n grades are often all
# equal; the judge scores each answer two points high (biased, but it ranks them).
NEAR_CONSTANT_ANSWERS = 150
NEAR_CONSTANT_GRADED = (10, 12, 20, 30)
NEAR_CONSTANT_SHARES = (0.01, 0.03, 0.05, 0.1)


@dataclass(frozen=True)
class EqualGradesCoverage:
    n_graded: int
    share: float  # the true mean: the share of answers graded 1 rather than 0
    all_equal: float  # share of runs whose n grades are all equal
    calibrated: float  # coverage of the calibrated interval
    human_only: float  # coverage of the grades' own interval
    never_zero_width: bool  # no interval of any run has zero width


def equal_grades_coverage(repetitions: int, seed: int = 0) -> list[EqualGradesCoverage]:
    """Every NEAR_CONSTANT_GRADED x NEAR_CONSTANT_SHARES: how often the intervals (cut to the 0-5 scale, as shown)
    cover the true mean, with how many runs graded all equal."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in NEAR_CONSTANT_GRADED:
        for share in NEAR_CONSTANT_SHARES:
            truth = (rng.random((repetitions, NEAR_CONSTANT_ANSWERS)) < share).astype(float)
            grades = np.where(np.arange(NEAR_CONSTANT_ANSWERS) < n, truth, np.nan)
            graded = truth[:, :n]
            covered = {}
            widths_positive = True
            for method, estimate in (("calibrated", calibrated_mean(truth + 2, grades)),
                                     ("human_only", human_mean(grades))):
                cut = within_scale(estimate, 0, 5)
                covered[method] = float(((cut.low <= share) & (share <= cut.high)).mean())
                widths_positive &= bool((cut.high - cut.low > 0).all())
            rows.append(EqualGradesCoverage(n, share, float((graded == graded[:, :1]).all(axis=1).mean()),
                                            covered["calibrated"], covered["human_only"], widths_positive))
    return rows


def equal_grades_differences(n_graded: int, repetitions: int, seed: int = 0) -> tuple[Difference, Difference]:
    """The gate's calibrated difference between two runs of NEAR_CONSTANT_ANSWERS whose true grades are all 0 (every
    grade equal, in both runs), and of two runs where a candidate drops from all 1 to all 0."""
    rng = np.random.default_rng(seed)
    judge = rng.integers(0, 6, size=(repetitions, NEAR_CONSTANT_ANSWERS)).astype(float)
    graded = np.arange(NEAR_CONSTANT_ANSWERS) < n_graded
    zeros = np.where(graded, 0.0, np.nan) * np.ones_like(judge)
    ones = np.where(graded, 1.0, np.nan) * np.ones_like(judge)
    same = mean_difference(calibrated_mean(judge, zeros), calibrated_mean(judge[::-1], zeros))
    drop = mean_difference(calibrated_mean(judge, zeros), calibrated_mean(judge[::-1], ones))
    return same, drop
