"""judging/summary.py on a small run written out by hand, every figure worked out by hand, and how the reports read
it (reports/judges.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rag_eval_assets.judging.grades import Grade
from rag_eval_assets.judging.summary import NO_GRADES, NO_SPOT_CHECK, judges_summary
from rag_eval_assets.reports.judges import agreement_rows, estimate_rows, judge_notes, judges_markdown
from rag_eval_assets.runs.contents import JUDGMENT_FRAME_COLUMNS, jsonable

A1, A2, A3, A4, B2, B3, C1 = (c * 64 for c in "1234567")
# (query_id, retriever, k, judge, score, replicate, judge_input_sha256)
ROWS = [
    ("q1", "bm25", 3, "groundedness", 5.0, 0, A1),
    ("q2", "bm25", 3, "groundedness", 3.0, 0, A2),
    ("q3", "bm25", 3, "groundedness", 4.0, 0, A3),
    ("q4", "bm25", 3, "groundedness", 0.0, 0, A4),
    ("q1", "bm25", 5, "groundedness", 5.0, 0, A1),  # the same judge input as at k 3: one graded answer, not two
    ("q2", "bm25", 5, "groundedness", 2.0, 0, B2),
    ("q3", "bm25", 5, "groundedness", 4.0, 0, B3),
    ("q1", "bm25", 3, "groundedness", 5.0, 1, A1),  # the spot-check: same score again
    ("q3", "bm25", 3, "groundedness", 3.0, 1, A3),  # one point off
    ("q1", "bm25", 3, "correctness", 2.0, 0, C1),
    ("q2", "bm25", 3, "correctness", np.nan, 0, None),  # abstained: never judged, left out
]


def _frame() -> pd.DataFrame:
    return pd.DataFrame(ROWS, columns=list(JUDGMENT_FRAME_COLUMNS))


def _grade(query_id: str, judge: str, sha: str, grade: int) -> Grade:
    return Grade(query_id, judge, sha, grade, "v1")


GRADES = {g.key: g for g in (_grade("q1", "groundedness", A1, 4), _grade("q2", "groundedness", A2, 3),
                             _grade("q4", "groundedness", A4, 1))}


def test_agreement_is_pooled_over_cells_once_per_graded_input_and_trust_waits_for_enough_grades() -> None:
    summary = judges_summary(_frame(), GRADES, "/x/eval.jsonl.grades.jsonl", trust_kappa=0.4, min_grades=10)
    grounded, correct = (j for j in sorted(summary.judges, key=lambda j: j.judge, reverse=True))
    a = grounded.agreement
    # Pairs (judge, person): (5, 4), (3, 3), (0, 1); q1 at k 5 saw the same input and is not counted again.
    assert a.n == 3 and a.exact == pytest.approx(1 / 3) and a.within_one == 1.0 and a.mean_bias == 0.0
    assert a.spearman == pytest.approx(1.0)
    # Quadratic kappa: observed weighted disagreement 1 + 0 + 1 = 2; expected: every (person, judge) pair of
    # {4, 3, 1} x {5, 3, 0} with weight 1/3, sum of squared differences 18 + 13 + 21 = 52, so 52/3.
    assert a.kappa == pytest.approx(1 - 2 / (52 / 3))
    assert a.confusion[4][5] == a.confusion[3][3] == a.confusion[1][0] == 1 and a.too_few
    assert grounded.trust is None and grounded.trust_note == "undecided: 3 graded answer(s), fewer than 10"
    assert correct.agreement is None and correct.trust_note == "no grade applies to this run's judge inputs"
    # Spot-check: q1 5 = 5, q3 3 against 4.
    s = grounded.self_consistency
    assert (s.pairs, s.exact_agreement, s.mean_abs_diff) == (2, 0.5, 0.5)
    assert correct.self_consistency is None

    enough = judges_summary(_frame(), GRADES, "g", trust_kappa=0.4, min_grades=3)
    (grounded3,) = [j for j in enough.judges if j.judge == "groundedness"]
    assert grounded3.trust.trusted and grounded3.trust_note == "trusted: kappa 0.88 >= 0.4"
    strict = judges_summary(_frame(), GRADES, "g", trust_kappa=0.9, min_grades=3)
    assert [j.trust.trusted for j in strict.judges if j.judge == "groundedness"] == [False]


def test_each_cell_has_the_naive_interval_and_where_graded_the_calibrated_estimate() -> None:
    summary = judges_summary(_frame(), GRADES, "g", trust_kappa=0.4, min_grades=10)
    (grounded,) = [j for j in summary.judges if j.judge == "groundedness"]
    k3, k5 = grounded.cells
    # k 3: scores 5, 3, 4, 0: mean 3, sample variance 14/3, se sqrt(14/3 / 4), t with 3 degrees of freedom.
    half = stats.t.ppf(0.975, 3) * math.sqrt(14 / 3 / 4)
    assert (k3.retriever, k3.k, k3.answers, k3.graded) == ("bm25", 3, 4, 3)
    # 3 -+ 3.44 reaches past both ends of the 0-5 scale: the interval shown is cut to it.
    assert (k3.judge_mean, k3.judge_low, k3.judge_high) == pytest.approx((3.0, max(0, 3 - half), min(5, 3 + half)))
    assert 3 - half < 0 and 3 + half > 5
    # Graded q1, q2, q4: y = 4, 3, 1. Three grades are fewer than JUDGE_FROM (30): the judge is left out and the
    # calibrated estimate is the grades' own mean 8/3, variance 7/3, t with 2 degrees of freedom.
    assert (k3.lam, k3.calibrated) == (0.0, pytest.approx(8 / 3))
    half = stats.t.ppf(0.975, 2) * math.sqrt(7 / 3 / 3)
    assert (k3.calibrated_low, k3.calibrated_high) == pytest.approx((max(0, 8 / 3 - half), min(5, 8 / 3 + half)))
    # k 5: one graded answer (q1's input again): the grade alone, lam 0, and no interval from one grade.
    assert (k5.k, k5.answers, k5.graded, k5.calibrated, k5.lam) == (5, 3, 1, 4.0, 0.0)
    assert math.isnan(k5.calibrated_low) and math.isnan(k5.calibrated_high)
    assert k5.judge_mean == pytest.approx(11 / 3)


def test_no_grades_file_says_how_to_grade_and_the_reports_state_too_few() -> None:
    none = jsonable(judges_summary(_frame(), None, "/x/e.grades.jsonl", trust_kappa=0.4, min_grades=10).as_json())
    assert none["note"] == NO_GRADES and none["grades"] is None
    assert {j["trust"] for j in none["judges"].values()} == {NO_GRADES}
    assert judge_notes(none)[0] == f"{NO_GRADES} (grades go to /x/e.grades.jsonl)"
    assert all(c["calibrated"] is None and c["graded"] == 0 for j in none["judges"].values() for c in j["cells"])

    graded = jsonable(judges_summary(_frame(), GRADES, "/x/e.grades.jsonl", trust_kappa=0.4, min_grades=10).as_json())
    notes = judge_notes(graded)
    assert notes[0].startswith("3 grade(s) in /x/e.grades.jsonl")
    assert ("groundedness: Only 3 graded answer(s), fewer than 10: these figures say little about the judge."
            in notes)
    assert NO_SPOT_CHECK not in notes  # groundedness was re-judged
    assert agreement_rows(graded) == [
        ["correctness", "0", "—", "—", "—", "—", "—", "no grade applies to this run's judge inputs"],
        ["groundedness", "3", "33%", "100%", "0.88", "1.00", "+0.00", "undecided: 3 graded answer(s), fewer than 10"],
    ]
    rows = estimate_rows(graded)  # 3 -+ 3.182 * 1.080 (the first test), cut to the scale; 3 grades flagged
    assert rows[1][:7] == ["groundedness", "bm25", "3", "4", "3.00", "[0.00, 5.00], n 4 answers",
                           "3 (< 10: not used by the gate)"]
    assert rows[1][8].endswith(", n 3 grades of 4 answers")  # each interval with the n it rests on
    assert rows[2][7:] == ["4.00", "—, n 1 grades of 3 answers"]  # one grade: an estimate, no interval
    text = judges_markdown(graded, "##")
    assert text.startswith("## Can the judge be trusted?")
    assert "### Agreement with itself (spot-check)\n\n| judge | re-judged | same score | mean abs. difference |" in text
    assert "| groundedness | 2 | 50% | 0.50 |" in text
