"""The gate (verdict/compare.py) on synthetic judged runs with a known truth, graded as a team grades in practice: a
dozen answers of each run. Shared by test_verdict_gate_simulation.py (the assertions) and benchmarks/judge_gate.py
(the table in docs/metrics.md).

A pair of runs: ANSWERS questions each, answered anew in each run, whose true (person's) grades are drawn from
TRUTH over 0-5 (mean 3.15); in a run whose answers got worse every true grade is one point lower (floored at 0). A
judge scores every answer; the person grades `graded` random answers of each run. The gate judges the one cell on
correctness with `calibrated: true` and the default min_grades (10), whatever the judge's agreement: its verdict is
the calibrated difference's (one cell, nothing to correct), which `simulate` computes for many pairs at once and
`gate_verdict` checks against compare_runs itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from rag_eval_assets.generation.prompts import JUDGE_PROMPTS
from rag_eval_assets.judging.calibration import calibrated_mean, mean_difference
from rag_eval_assets.judging.grades import Grade
from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.compare import BETTER, NO_CHANGE, WORSE, compare_runs
from rag_eval_assets.verdict.settings import GateSettings

VERSION = next(iter(JUDGE_PROMPTS))
ANSWERS = 150
GRADED = (12, 40)  # grades per run: as a team grades a first time (the judge left out), and past JUDGE_FROM
TRUTH = (0.05, 0.10, 0.15, 0.25, 0.25, 0.20)
GATE = GateSettings(metric="correctness", calibrated=True)
# constant: 5 for every answer (kappa 0); pure_noise: uniform 0-5 whatever the answer; two_points_high: the grade
# plus two, one point off either way a quarter of the time each, clipped (it gives most answers 5); unbiased_noisy:
# the grade one point off either way a quarter of the time each, clipped.
JUDGES = ("constant", "pure_noise", "two_points_high", "unbiased_noisy")
# (judge of the baseline, judge of the candidate, the candidate's answers truly worse)
CASES = (
    ("constant", "constant", False), ("pure_noise", "pure_noise", False),
    ("two_points_high", "two_points_high", False), ("unbiased_noisy", "two_points_high", False),
    ("constant", "constant", True), ("pure_noise", "pure_noise", True),
    ("two_points_high", "two_points_high", True), ("unbiased_noisy", "unbiased_noisy", True),
)


def scores(judge: str, truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    off = rng.choice([-1, 0, 1], p=[0.25, 0.5, 0.25], size=truth.shape)
    if judge == "constant":
        return np.full(truth.shape, 5)
    if judge == "pure_noise":
        return rng.integers(0, 6, size=truth.shape)
    if judge == "two_points_high":
        return np.clip(truth + 2 + off, 0, 5)
    if judge == "unbiased_noisy":
        return np.clip(truth + off, 0, 5)
    raise ValueError(f"unknown judge {judge!r}; known: {JUDGES}")


def _run(name: str, judged: np.ndarray) -> Run:
    rows = [{"query_id": f"q{i:03d}", "question": f"Question {i}?", "retriever": "bm25", "k": 5,
             "metrics": {"correctness": float(score)},
             "judgments": [{"judge": "correctness", "score": int(score), "replicate": 0,
                            "judge_input_sha256": _digest(f"{name} {i}")}]}
            for i, score in enumerate(judged)]
    config = {"version_tuple": {"dataset": {"evalset_sha256": "e", "corpus_sha256": "c"},
                                "judge": {"model": "judge-m", "prompt_version": VERSION, "temperature": 0.0}}}
    return Run(Path(name), rows, {"aggregate": []}, config, "")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def draw(judge: str, worse: bool, graded: int, repetitions: int,
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(judge scores, grades with NaN where not graded) of `repetitions` runs, each (repetitions, ANSWERS)."""
    truth = np.maximum(rng.choice(6, p=TRUTH, size=(repetitions, ANSWERS)) - (1 if worse else 0), 0)
    judged = scores(judge, truth, rng).astype(float)
    chosen = np.argsort(rng.random(truth.shape), axis=1)[:, :graded]
    grades = np.full(truth.shape, np.nan)
    np.put_along_axis(grades, chosen, np.take_along_axis(truth, chosen, axis=1).astype(float), axis=1)
    return judged, grades


def simulate(base_judge: str, cand_judge: str, worse: bool, graded: int, repetitions: int,
             seed: int = 0) -> tuple[np.ndarray, list[tuple[np.ndarray, ...]]]:
    """The verdict of each of `repetitions` pairs of runs, from the calibrated difference the gate tests (one cell,
    so no correction), and the pairs themselves (base scores, base grades, candidate scores, candidate grades)."""
    rng = np.random.default_rng(seed)
    base, cand = draw(base_judge, False, graded, repetitions, rng), draw(cand_judge, worse, graded, repetitions, rng)
    d = mean_difference(calibrated_mean(*cand, GATE.alpha), calibrated_mean(*base, GATE.alpha), GATE.alpha)
    significant = d.p_value < GATE.alpha
    verdict = np.where(significant & (d.estimate < 0), WORSE, np.where(significant & (d.estimate > 0), BETTER,
                                                                        NO_CHANGE))
    return verdict, [(base[0][i], base[1][i], cand[0][i], cand[1][i]) for i in range(repetitions)]


def gate_verdict(base_scores: np.ndarray, base_grades: np.ndarray, cand_scores: np.ndarray,
                 cand_grades: np.ndarray) -> str:
    """What `compare_runs` says of one pair, as runs with judgements and a grades file would give it; the cell is
    checked to be decided by its calibrated means."""
    grades = {}
    runs = []
    for name, judged, graded in (("base", base_scores, base_grades), ("cand", cand_scores, cand_grades)):
        runs.append(_run(name, judged))
        for i in np.flatnonzero(~np.isnan(graded)):
            grade = Grade(f"q{i:03d}", "correctness", _digest(f"{name} {i}"), int(graded[i]), VERSION)
            grades[grade.key] = grade
    comparison = compare_runs(runs[0], runs[1], GATE, grading=Grading(grades), n_perm=100)
    (cell,) = comparison.cells
    assert (cell.metric, cell.estimate, cell.skipped) == ("correctness", "calibrated", ()), cell
    return comparison.verdict


def rates(verdicts: np.ndarray) -> dict[str, float]:
    """false_alarm: any significant verdict (two-sided); worse: the share of WORSE."""
    return {"false_alarm": float(np.mean(verdicts != NO_CHANGE)), "worse": float(np.mean(verdicts == WORSE))}
