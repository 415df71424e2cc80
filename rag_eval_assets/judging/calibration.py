"""A judge metric's mean, rectified by a person's grades: prediction-powered inference (Angelopoulos et al., Science
2023) with PPI++'s power tuning (Angelopoulos, Duchi, Zrnic 2024), as ARES (Saad-Falcon et al. 2024) uses it.

The judge scored N answers (f); a person graded n of them, a random sample (Y). The grades' mean alone is unbiased
but wide; the judge's mean is narrow but carries the judge's bias. The calibrated estimate uses the judge on the
N - n ungraded answers and measures the judge's error on the graded ones:

    theta = lam * mean(f, ungraded) + mean(Y - lam * f, graded)
    lam   = Cov(Y, f) / ((1 + n / (N - n)) * Var(f)), clipped to [0, 1]   (Cov over the graded, Var over all N)
            and 0 below JUDGE_FROM grades
    se^2  = lam^2 * Var(f) / (N - n) + Var(Y - lam * f) / n      Var(Y - lam * f) with ddof 2 when lam > 0
    interval = theta -+ t(1 - alpha/2, df) * se                   df = n - 2 when lam > 0, else n - 1

The ungraded answers, not all N, are PPI's unlabelled sample: the graded ones are among the N, and with all N the
usual variance misses the overlap (the simulation in docs/metrics.md covers 91% at n = 200 of N = 500 that way).
lam = 0 gives exactly the human-only mean and interval, so power tuning can only narrow it (in expectation). lam is
fitted to the same grades it rectifies, which makes the residual variance look smaller than it is: one degree of
freedom is spent on it, and below JUDGE_FROM grades the fit is too loose to use at all (a pair of runs graded 12
times each, the gate's false alarms went to 6-7% with informative judges: docs/metrics.md), so the estimate is the
grades' own mean.
Every sample variance is floored at STEP^2 / n, the variance of n grades on the judges' integer scale of which one
differs from the others by one point: n equal grades (all 0 after a bad change, say) would otherwise give a zero
width interval, a certainty that a handful of grades cannot give. Where the true share of other grades is small, all
n equal is the likely draw, and the t interval of zero width misses the truth often (coverage 10-64% at a
share of 1-5% with 10-20 grades); floored, the interval is as wide as one disagreement would make it and covers
(docs/metrics.md, "Intervals of equal grades"). A sample that already varies has at least that variance, so the
floor changes nothing else on whole-point grades.
Every function takes one run as 1-D arrays (fields are floats) or a batch of runs as 2-D arrays, one run a row
(fields are arrays over the rows), the simulation's case.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

Value = float | np.ndarray
JUDGE_FROM = 30  # the fewest grades from which the judge is weighed in (lam may exceed 0)
STEP = 1.0  # the judges' scale moves in whole points: the smallest disagreement between two grades


@dataclass(frozen=True)
class MeanEstimate:
    """estimate -+ t(1 - alpha/2, df) * se = [low, high]; df = inf would be the normal interval."""

    estimate: Value
    se: Value
    low: Value
    high: Value
    df: Value


@dataclass(frozen=True)
class CalibratedMean(MeanEstimate):
    lam: Value  # the weight on the judge: 0 ignores it (human-only), 1 trusts its ranking fully
    n_graded: int | np.ndarray
    n_answers: int | np.ndarray


@dataclass(frozen=True)
class Difference:
    """current - baseline, its interval and two-sided p-value from one Welch t statistic: the interval excludes 0
    exactly when p_value < alpha."""

    estimate: Value
    se: Value
    low: Value
    high: Value
    t: Value
    df: Value  # Welch-Satterthwaite degrees of freedom of the two runs' standard errors
    p_value: Value


def judge_mean(judge: ArrayLike, alpha: float = 0.05) -> MeanEstimate:
    """The naive interval: the judge's mean over all N answers, df N - 1. It is only as right as the judge."""
    f, one = _rows(judge, "judge")
    _finite(f, "judge")
    mean, var, count = _mean_var(f, np.ones(f.shape, dtype=bool))
    return _estimate(mean, np.sqrt(var / count), count - 1, alpha, one)


def human_mean(grades: ArrayLike, alpha: float = 0.05) -> MeanEstimate:
    """The human-only interval: the mean of the grades (NaN = not graded, ignored), df n - 1."""
    y, one = _rows(grades, "grades")
    graded = _graded(y)
    mean, var, count = _mean_var(y, graded)
    return _estimate(mean, np.sqrt(var / count), count - 1, alpha, one)


def calibrated_mean(judge: ArrayLike, grades: ArrayLike, alpha: float = 0.05,
                    judge_from: int = JUDGE_FROM) -> CalibratedMean:
    """The PPI++ estimate (module docstring) from the judge's scores of all N answers and the person's grades of the
    same answers in the same order, NaN where not graded. Needs at least one grade; with one, se is NaN. Below
    `judge_from` grades the judge is left out (lam 0)."""
    f, one = _rows(judge, "judge")
    y, _ = _rows(grades, "grades")
    if f.shape != y.shape:
        raise ValueError(f"judge scores {f.shape} and grades {y.shape} must be the same answers in the same order")
    _finite(f, "judge")
    graded = _graded(y)
    n = graded.sum(axis=1)
    ungraded = f.shape[1] - n
    with np.errstate(divide="ignore", invalid="ignore"):
        y_mean, _, _ = _mean_var(y, graded)
        f_mean, _, _ = _mean_var(f, graded)
        cov = np.where(graded, (y - y_mean[:, None]) * (f - f_mean[:, None]), 0.0).sum(axis=1) / (n - 1)
        var_f = f.var(axis=1, ddof=1) if f.shape[1] > 1 else np.full(len(f), np.nan)
        ratio = cov / ((1 + n / ungraded) * var_f)
        # Undefined (one grade, a constant judge), too few grades to fit, or no ungraded answer to use: the judge is
        # left out.
        fit = (ungraded > 0) & (n >= max(judge_from, 3)) & np.isfinite(ratio)
        lam = np.where(fit, np.clip(ratio, 0.0, 1.0), 0.0)
        use = lam > 0
        f_ungraded = np.where(graded, 0.0, f).sum(axis=1) / ungraded
        rectified = np.where(graded, y, 0.0) - lam[:, None] * f
        mean, var, _ = _mean_var(rectified, graded)
        # Guarded by `use` so that lam = 0 is the human-only arithmetic to the last bit, even with NaN beside it.
        mean = mean + np.where(use, lam * f_ungraded, 0.0)
        var = np.where(use, var * (n - 1) / (n - 2), var)  # lam was fitted to these residuals: ddof 2
        se = np.sqrt(var / n + np.where(use, lam**2 * var_f / ungraded, 0.0))
        df = n - 1 - use
    base = _estimate(mean, se, df, alpha, one)
    return CalibratedMean(**vars(base), lam=_out(lam, one), n_graded=_out(n, one),
                          n_answers=_out(np.full(len(f), f.shape[1]), one))


def mean_difference(current: MeanEstimate, baseline: MeanEstimate, alpha: float = 0.05) -> Difference:
    """current - baseline of two runs' estimates, taken as independent: se^2 = se_c^2 + se_b^2, and Student's t with
    Welch-Satterthwaite's degrees of freedom, since each se is estimated from its own run's grades (with 12 grades a
    run the normal quantile raised the gate's false alarms to 6.2-6.4%). When both runs' errors move together (the same
    questions, grades reused) the true variance is smaller, so the interval is conservative (too wide), never too
    narrow."""
    from scipy import stats  # when used: scipy.stats is a second of every Dagster process's import

    _alpha(alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.asarray(current.estimate, dtype=float) - np.asarray(baseline.estimate, dtype=float)
        var_c, var_b = np.square(current.se), np.square(baseline.se)
        se = np.sqrt(var_c + var_b)
        df = np.where(se > 0, (var_c + var_b) ** 2 / (var_c**2 / current.df + var_b**2 / baseline.df), np.inf)
        # se = 0: no doubt left, so any change is certain and no change is none.
        t = np.where(se > 0, d / se, np.where(d == 0, 0.0, np.sign(d) * np.inf))
        t = np.where(np.isnan(d) | np.isnan(se), np.nan, t)
        p = 2 * stats.t.sf(np.abs(t), df)
        half = stats.t.ppf(1 - alpha / 2, df) * se
    one = np.ndim(d) == 0
    return Difference(*(_out(np.atleast_1d(v), one) for v in (d, se, d - half, d + half, t, df, p)))


def within_scale(estimate: MeanEstimate, bottom: float, top: float) -> MeanEstimate:
    """The interval cut to the scale the scores lie on: the mean of scores in [bottom, top] lies there too, so the
    cut never loses coverage (the simulation checks it) and never shows a grade below 0 on a 0-5 scale."""
    with np.errstate(invalid="ignore"):
        low, high = np.clip(estimate.low, bottom, top), np.clip(estimate.high, bottom, top)
    return replace(estimate, low=low if np.ndim(low) else float(low), high=high if np.ndim(high) else float(high))


def _estimate(mean: np.ndarray, se: np.ndarray, df: np.ndarray, alpha: float, one: bool) -> MeanEstimate:
    """The t interval with `df` degrees of freedom (none, for one item: NaN)."""
    from scipy import stats  # when used: scipy.stats is a second of every Dagster process's import

    _alpha(alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.asarray(df, dtype=float)
        half = stats.t.ppf(1 - alpha / 2, np.where(df > 0, df, np.nan)) * se
    return MeanEstimate(*(_out(v, one) for v in (mean, se, mean - half, mean + half, df)))


def _mean_var(values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, over the masked items: mean, sample variance (ddof 1, floored at STEP^2 / count: module docstring;
    NaN for one item) and count."""
    count = mask.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(mask, values, 0.0).sum(axis=1) / count
        var = np.where(mask, (values - mean[:, None]) ** 2, 0.0).sum(axis=1) / (count - 1)
        var = np.maximum(var, STEP**2 / count)
    return mean, np.where(count > 1, var, np.nan), count


def _rows(values: ArrayLike, name: str) -> tuple[np.ndarray, bool]:
    array = np.asarray(values, dtype=float)
    if array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise ValueError(f"{name}: expected one run's scores (1-D) or one run per row (2-D), got shape {array.shape}")
    return np.atleast_2d(array), array.ndim == 1


def _finite(f: np.ndarray, name: str) -> None:
    bad = np.argwhere(~np.isfinite(f))
    if len(bad):
        row, column = (int(i) for i in bad[0])
        raise ValueError(f"{name}: every answer needs a finite score; answer {column} (run {row}) has "
                         f"{float(f[row, column])!r}, {len(bad)} such in all")


def _graded(y: np.ndarray) -> np.ndarray:
    if np.isinf(y).any():
        raise ValueError("grades: infinite grade; a grade is a number, or NaN for an answer not graded")
    graded = ~np.isnan(y)
    if not graded.any(axis=1).all():
        raise ValueError("grades: no graded answer; a calibrated or human-only mean needs at least one grade")
    return graded


def _alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")


def _out(values: np.ndarray, one: bool) -> Value:
    return values[0].item() if one else values
