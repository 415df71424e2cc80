"""The gate's use of a person's grades (issue 23): whether a judge is trusted, and a judge metric's change between two
runs as the difference of their calibrated (PPI++) means.

A judge is "not trusted" when its quadratic-weighted kappa with the person, pooled over the graded judgements of both
runs (an answer graded once counted once), is below `trust_kappa` with at least `min_grades` grades; with fewer grades
nothing is known against it. Trust matters only where the judge's raw scores would decide a cell: the calibrated
difference of a cell takes each run's judge scores of every answer it judged there, rectified by the grades that
apply to that run's answers (judging/calibration.py), which is valid for any judge (an uninformative one gets a weight
near 0 and the estimate becomes the grades' own mean), so a cell both runs graded `min_grades` times is decided by it
whatever the agreement; a run with fewer grades in the cell gives no calibrated estimate. Files are read by the
caller (judging/grading.py); this module only computes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rag_eval_assets.generation.judges import JUDGES
from rag_eval_assets.judging.agreement import decide_trust
from rag_eval_assets.judging.calibration import CalibratedMean, calibrated_mean, mean_difference
from rag_eval_assets.judging.graded import pooled_agreement, with_grades
from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.gate import weighted_terms


@dataclass(frozen=True)
class JudgeTrust:
    """A judge's agreement with the person over the n graded judgements of the runs compared."""

    judge: str
    n: int
    kappa: float | None  # None: undefined, or no grade
    trusted: bool  # True also when too few grades say anything against it
    reason: str


@dataclass(frozen=True)
class CalibratedChange:
    """cand - base of a cell's calibrated means: `interval` excludes 0 exactly when p_value < alpha."""

    base: CalibratedMean
    cand: CalibratedMean
    delta: float
    ci_low: float
    ci_high: float
    p_value: float


def is_judge_metric(metric: str) -> bool:
    return metric in JUDGES


def graded_frame(run: Run, grading: Grading) -> pd.DataFrame:
    """The run's main judgements with the grade that applies to each (judging/graded.py)."""
    return with_grades(run.judgment_frame(), grading.grades)


def judge_trust(graded: pd.DataFrame, grading: Grading) -> dict[str, JudgeTrust]:
    """Every judge with a graded judgement in `graded` (graded_frame of one run, or of both runs concatenated), and
    whether it is trusted."""
    out = {}
    for judge in JUDGES:
        a = pooled_agreement(graded, judge, grading.min_grades)
        if a is None:
            continue
        kappa = None if math.isnan(a.kappa) else a.kappa
        verdict = decide_trust(a, grading.trust_kappa, grading.min_grades)
        if verdict is None:
            out[judge] = JudgeTrust(judge, a.n, kappa, True, f"{a.n} grade(s), fewer than min_grades "
                                                              f"{grading.min_grades}: trust not judged")
        else:
            out[judge] = JudgeTrust(judge, a.n, kappa, verdict.trusted, f"{verdict.reason} ({a.n} grades)")
    return out


def calibrated_change(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    retriever: str,
    k: int,
    judge: str,
    weights: Mapping[str, float],
    grading: Grading,
    alpha: float,
) -> CalibratedChange | str:
    """The cell's change on `judge` as the difference of the two runs' calibrated means (weighted like the paired
    test), or why there is none."""
    short = too_few_grades(base, cand, retriever, k, judge, grading)
    if short:
        return short
    means = {}
    for role, frame in (("base", base), ("candidate", cand)):
        cell = _cell(frame, retriever, k, judge)
        w = np.array([weights.get(q, 1.0) for q in cell["query_id"]])
        # Scaled so that plain means are the weighted means, as the paired test's differences are.
        scores = weighted_terms(cell["score"].to_numpy(dtype=float), w)
        grades = weighted_terms(cell["grade"].to_numpy(dtype=float), w)
        means[role] = calibrated_mean(scores, grades, alpha)
    d = mean_difference(means["candidate"], means["base"], alpha)
    if math.isnan(d.p_value):
        return f"the calibrated difference of {judge} has no interval: a run has a single grade in this cell"
    return CalibratedChange(means["base"], means["candidate"], float(d.estimate), float(d.low), float(d.high),
                            float(d.p_value))


def too_few_grades(base: pd.DataFrame, cand: pd.DataFrame, retriever: str, k: int, judge: str,
                   grading: Grading) -> str | None:
    """Why the cell of `judge` has no calibrated estimate for lack of grades (a run with fewer than min_grades, and
    never fewer than two, which an interval needs), or None when both runs have enough."""
    least = max(grading.min_grades, 2)
    for role, frame in (("base", base), ("candidate", cand)):
        n = int(_cell(frame, retriever, k, judge)["grade"].notna().sum())
        if n < least:
            return f"the {role} run has {n} grade(s) of {judge} in this cell, fewer than min_grades {least}"
    return None


def _cell(frame: pd.DataFrame, retriever: str, k: int, judge: str) -> pd.DataFrame:
    return frame[(frame["retriever"] == retriever) & (frame["k"] == k) & (frame["judge"] == judge)]
