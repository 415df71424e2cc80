"""What a run's judges are worth, per judge metric: how far the judge agrees with a person's grades (pooled over the
run's cells) and whether it is trusted, how far it agrees with itself (the spot-check's re-judged answers), and per
(retriever, k) cell its raw mean with the naive interval beside the calibrated (PPI++) estimate where grades apply.

Plain data out (`JudgesSummary.as_json`, metrics.json's `judges` section); the reports render that section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.generation.judges import judge_agreement
from rag_eval_assets.judging.agreement import SCALE, Agreement, Trust, decide_trust
from rag_eval_assets.judging.calibration import calibrated_mean, judge_mean, within_scale
from rag_eval_assets.judging.graded import pooled_agreement, with_grades
from rag_eval_assets.judging.grades import Grade, GradeKey

NO_GRADES = "no grades yet: rag-eval label --grade RUN"
SCALE_BOUNDS = (min(SCALE), max(SCALE))  # the judges' scale: the intervals shown are cut to it
NO_SPOT_CHECK = "no spot-check: rag-eval run --spot-check N re-judges N answers once more"


@dataclass(frozen=True)
class CellEstimate:
    """One (retriever, k) cell of one judge metric: the judge's mean over its `answers` scored answers with the naive
    95% interval, and where any of them is graded, the calibrated estimate and its 95% interval."""

    retriever: str
    k: int
    answers: int
    judge_mean: float
    judge_low: float
    judge_high: float
    graded: int
    calibrated: float | None = None
    calibrated_low: float | None = None
    calibrated_high: float | None = None
    lam: float | None = None  # PPI++'s weight on the judge (0: the grades alone)


@dataclass(frozen=True)
class SelfConsistency:
    """The spot-check: each re-judged answer's score against its first score (generation/judges.py)."""

    pairs: int
    exact_agreement: float
    mean_abs_diff: float


@dataclass(frozen=True)
class JudgeSummary:
    judge: str
    agreement: Agreement | None  # None: no grade applies to this run's judge inputs
    trust: Trust | None  # None: too few grades to decide
    trust_note: str  # the decision or why there is none, in words
    self_consistency: SelfConsistency | None  # None: no answer re-judged
    cells: tuple[CellEstimate, ...]


@dataclass(frozen=True)
class JudgesSummary:
    grades_file: str
    grades: int | None  # grades in the file; None: no file yet
    trust_kappa: float
    min_grades: int
    judges: tuple[JudgeSummary, ...]

    @property
    def note(self) -> str | None:
        return NO_GRADES if self.grades is None else None

    def as_json(self) -> dict[str, Any]:
        """metrics.json's `judges` section (NaN becomes null when written)."""
        return {
            "grades_file": self.grades_file,
            "grades": self.grades,
            "note": self.note,
            "trust_kappa": self.trust_kappa,
            "min_grades": self.min_grades,
            "judges": {j.judge: {
                "agreement": None if j.agreement is None else asdict(j.agreement),
                "trusted": None if j.trust is None else j.trust.trusted,
                "trust": j.trust_note,
                "self_consistency": None if j.self_consistency is None else asdict(j.self_consistency),
                "cells": [asdict(c) for c in j.cells],
            } for j in self.judges},
        }


def judges_summary(judgments: pd.DataFrame, grades: Mapping[GradeKey, Grade] | None, grades_file: str | Path, *,
                   trust_kappa: float, min_grades: int) -> JudgesSummary:
    """The summary of every judge metric of `judgments` (Run.judgment_frame's columns: main judgements and the
    spot-check's replicates), against `grades` (judging/grades.py load_grades of `grades_file`; None when the file
    does not exist). An answer graded once counts once in the agreement, however many cells saw the same input."""
    graded = with_grades(judgments, grades or {})
    self_agreement = judge_agreement(judgments)
    summaries = []
    for judge in sorted(set(graded["judge"])):
        rows = graded[graded["judge"] == judge]
        found = pooled_agreement(graded, judge, min_grades)
        trust = decide_trust(found, trust_kappa, min_grades) if found is not None else None
        if found is None:
            note = NO_GRADES if grades is None else "no grade applies to this run's judge inputs"
        elif trust is None:
            note = f"undecided: {found.n} graded answer(s), fewer than {min_grades}"
        else:
            note = trust.reason
        spot = self_agreement.get(judge, {})
        consistency = SelfConsistency(int(spot["pairs"]), spot["exact_agreement"], spot["mean_abs_diff"]) \
            if spot.get("pairs") else None
        summaries.append(JudgeSummary(judge, found, trust, note, consistency, _cells(rows)))
    return JudgesSummary(str(grades_file), None if grades is None else len(grades), trust_kappa, min_grades,
                         tuple(summaries))


def _cells(rows: pd.DataFrame) -> tuple[CellEstimate, ...]:
    cells = []
    for (retriever, k), cell in rows.groupby(["retriever", "k"], sort=True):
        scores, grades = cell["score"].to_numpy(float), cell["grade"].to_numpy(float)
        naive = within_scale(judge_mean(scores), *SCALE_BOUNDS)
        n_graded = int((~np.isnan(grades)).sum())
        calibrated = {}
        if n_graded:
            c = within_scale(calibrated_mean(scores, grades), *SCALE_BOUNDS)
            calibrated = {"calibrated": c.estimate, "calibrated_low": c.low,
                          "calibrated_high": c.high, "lam": c.lam}
        cells.append(CellEstimate(str(retriever), int(k), len(scores), naive.estimate, naive.low,
                                  naive.high, n_graded, **calibrated))
    return tuple(cells)
