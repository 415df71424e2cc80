"""A run's judge scores beside the person's grades that apply to them: the input of the agreement (agreement.py) and
of the calibrated means (calibration.py) of each judge metric and cell.

A grade applies to a judgement when its question, judge and judge-input digest match (judging/grades.py), so an
answer graded once counts in every run and cell whose judge saw the same input."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from rag_eval_assets.judging.agreement import Agreement, agreement
from rag_eval_assets.judging.grades import Grade, GradeKey

GRADED_COLUMNS = ("query_id", "retriever", "k", "judge", "score", "grade", "judge_input_sha256")


def with_grades(judgments: pd.DataFrame, grades: Mapping[GradeKey, Grade]) -> pd.DataFrame:
    """The main judgements (replicate 0) that have a score, with the grade that applies to each (NaN where none):
    GRADED_COLUMNS. `judgments` as Run.judgment_frame gives them."""
    main = judgments[(judgments["replicate"] == 0) & judgments["score"].notna()]
    grade = [
        np.nan if digest is None or (hit := grades.get(GradeKey(str(q), str(judge), str(digest)))) is None
        else float(hit.grade)
        for q, judge, digest in zip(main["query_id"], main["judge"], main["judge_input_sha256"])
    ]
    out = main.assign(grade=np.array(grade, dtype=float))[list(GRADED_COLUMNS)]
    return out.reset_index(drop=True).astype({"k": "int64", "score": "float64"})


def pooled_agreement(graded: pd.DataFrame, judge: str, minimum: int) -> Agreement | None:
    """The judge's agreement with the person over a run's graded judgements (with_grades), every cell pooled, an
    answer the person graded once counted once however many cells put the same input before the judge; None when no
    grade applies. The one measure the report shows and the gate decides trust on."""
    pairs = graded[(graded["judge"] == judge) & graded["grade"].notna()].drop_duplicates(
        ["query_id", "judge_input_sha256"])
    return agreement(pairs["score"].to_numpy(), pairs["grade"].to_numpy(), minimum=minimum) if len(pairs) else None
