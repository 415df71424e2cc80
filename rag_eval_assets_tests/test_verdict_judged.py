"""The gate with a person's grades (issue 23): a judge metric's cell judged on the runs' calibrated means
(report.gate.calibrated), the correction that mixes calibrated and paired cells, and a judge that is not trusted
passed over for the cell's next metric."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.generation.prompts import JUDGE_PROMPTS
from rag_eval_assets.judging.agreement import agreement
from rag_eval_assets.judging.grades import Grade, GradeKey
from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.reports.comparison import comparison_markdown, format_comparison
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.compare import BETTER, CALIBRATED, NO_CHANGE, PAIRED, WORSE, compare_runs
from rag_eval_assets.verdict.corrections import corrected
from rag_eval_assets.verdict.ranking import rank_retrievers
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets_tests.test_verdict_compare import config

VERSION = next(iter(JUDGE_PROMPTS))
CFG = config(judge={"model": "judge-m", "prompt_version": VERSION, "temperature": 0.0})
N = 150
GRADED = 40
IDS = [f"q{i:03d}" for i in range(N)]
# True (person's) grades of the answers, 1-5: one point down stays on the scale.
TRUTH = (0.0, 0.10, 0.15, 0.25, 0.25, 0.25)
CALIBRATED_GATE = GateSettings(metric="correctness", calibrated=True)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def judged_run(path: Path, scores: np.ndarray, inputs: list[str], extra: dict[str, list[float]] | None = None) -> Run:
    """One cell, bm25@5: question i judged `scores[i]` on correctness, its judge input named `inputs[i]`."""
    rows = []
    for i, query_id in enumerate(IDS):
        metrics = {"correctness": float(scores[i]), **{name: column[i] for name, column in (extra or {}).items()}}
        rows.append({"query_id": query_id, "question": f"Question {query_id}?", "retriever": "bm25", "k": 5,
                     "metrics": metrics,
                     "judgments": [{"judge": "correctness", "score": int(scores[i]), "replicate": 0,
                                    "judge_input_sha256": digest(inputs[i])}]})
    return Run(path, rows, {"aggregate": []}, CFG, "")


def grades_of(inputs: list[str], truth: np.ndarray, which: np.ndarray) -> dict[GradeKey, Grade]:
    """The person's grades (the truth) of the answers `which`."""
    out = {}
    for i in which:
        grade = Grade(IDS[i], "correctness", digest(inputs[i]), int(truth[i]), VERSION)
        out[grade.key] = grade
    return out


def judge(truth: np.ndarray, rng: np.random.Generator, bias: float) -> np.ndarray:
    """A judge one point off either way a quarter of the time each, `bias` points high, on the 0-5 scale."""
    off = rng.choice([-1, 0, 1], p=[0.25, 0.5, 0.25], size=truth.shape)
    return np.clip(truth + bias + off, 0, 5)


def regression(tmp_path: Path, seed: int) -> tuple[Run, Run, Grading]:
    """The candidate's answers are truly one point worse; the judge is one point generous in both runs; each run's
    answers are new, so each has its own 40 grades."""
    rng = np.random.default_rng(seed)
    truth_base = rng.choice(6, p=TRUTH, size=N)
    truth_cand = truth_base - 1
    base_inputs, cand_inputs = [f"base {q}" for q in IDS], [f"cand {q}" for q in IDS]
    base = judged_run(tmp_path / "base", judge(truth_base, rng, 1), base_inputs)
    cand = judged_run(tmp_path / "cand", judge(truth_cand, rng, 1), cand_inputs)
    grades = {**grades_of(base_inputs, truth_base, rng.choice(N, GRADED, replace=False)),
              **grades_of(cand_inputs, truth_cand, rng.choice(N, GRADED, replace=False))}
    return base, cand, Grading(grades)


def drift(tmp_path: Path, seed: int) -> tuple[Run, Run, Grading]:
    """The same answers in both runs (no true change), the judge one point more generous in the candidate only; the
    40 graded answers are graded once and the grades apply to both runs (same judge inputs)."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(6, p=TRUTH, size=N)
    inputs = [f"answer {q}" for q in IDS]
    base = judged_run(tmp_path / "base", judge(truth, rng, 0), inputs)
    cand = judged_run(tmp_path / "cand", judge(truth, rng, 1), inputs)
    return base, cand, Grading(grades_of(inputs, truth, rng.choice(N, GRADED, replace=False)))


def test_the_calibrated_gate_fails_a_true_drop_and_passes_a_judge_that_drifted(tmp_path: Path) -> None:
    verdicts = {"regression": [], "drift raw": [], "drift calibrated": []}
    for seed in range(20):
        base, cand, grading = regression(tmp_path, seed)
        c = compare_runs(base, cand, CALIBRATED_GATE, grading=grading, n_perm=2000)
        verdicts["regression"].append(c.verdict)
        base, cand, grading = drift(tmp_path, seed)
        raw = compare_runs(base, cand, GateSettings(metric="correctness"), grading=grading, n_perm=2000)
        verdicts["drift raw"].append(raw.verdict)
        calibrated = compare_runs(base, cand, CALIBRATED_GATE, grading=grading, n_perm=2000)
        verdicts["drift calibrated"].append(calibrated.verdict)
        (cell,) = calibrated.cells
        assert (cell.estimate, cell.n_graded_base, cell.n_graded_cand) == (CALIBRATED, GRADED, GRADED)
        # The interval and the test are one z: it excludes 0 exactly when p < alpha.
        assert (cell.ci_low > 0 or cell.ci_high < 0) == (cell.p_value < 0.05)
    counts = {name: pd.Series(v).value_counts().to_dict() for name, v in verdicts.items()}
    print(counts)
    assert counts["regression"] == {WORSE: 20}
    # The raw judge scores rose by about 0.8 point: the raw gate calls the drift an improvement every time ...
    assert counts["drift raw"] == {BETTER: 20}
    # ... the calibrated gate sees no change (at most the 5% a test at alpha 0.05 may get wrong).
    assert counts["drift calibrated"].get(NO_CHANGE, 0) >= 19


def test_a_calibrated_cell_records_its_estimates_and_the_text_says_so(tmp_path: Path) -> None:
    base, cand, grading = regression(tmp_path, 0)
    c = compare_runs(base, cand, CALIBRATED_GATE, grading=grading, n_perm=2000)
    (cell,) = c.cells
    raw = compare_runs(base, cand, GateSettings(metric="correctness"), grading=grading, n_perm=2000).cells[0]
    # The raw means carry the judge's generosity; the calibrated ones come back near the truth (3.45 -> 2.45 in
    # expectation) and their difference near -1.
    assert raw.base > cell.base + 0.5 and cell.delta == pytest.approx(-1, abs=0.3)
    assert (cell.result, cell.estimate, cell.n_pairs) == (WORSE, CALIBRATED, N)
    n = f"n 40 grades of {N} answers in the base run, 40 grades of {N} answers in the candidate"
    assert c.failures == [f"bm25@5: correctness (calibrated) delta {cell.delta:+.4f} "
                          f"[{cell.ci_low:+.4f}, {cell.ci_high:+.4f}] ({n}) is below min_delta 0.0 (p_adj < 0.001)"]
    text = format_comparison(c)
    assert "decided by bm25@5 correctness (calibrated)" in text.splitlines()[0]
    assert (f"  * bm25@5: correctness calibrated by the person's grades: {cell.base:.2f} -> {cell.cand:.2f}, "
            f"{cell.delta:+.2f} [{cell.ci_low:+.2f}, {cell.ci_high:+.2f}], n 40 grades of {N} answers in the base "
            f"run, 40 grades of {N} answers in the candidate") in text
    assert "| bm25@5 | correctness (calibrated) |" in comparison_markdown(c)
    record = c.as_json()["cells"][0]
    assert (record["estimate"], record["n_graded_base"], record["n_graded_cand"]) == (CALIBRATED, 40, 40)
    assert (record["n_answers_base"], record["n_answers_cand"]) == (N, N)


def test_too_few_grades_fall_back_to_the_paired_test_and_say_so(tmp_path: Path) -> None:
    base, cand, grading = regression(tmp_path, 1)
    # Only the candidate's grades: the base run has none that apply to it.
    only_cand = {key: g for key, g in grading.grades.items() if g.judge_input_sha256 in
                 {j["judge_input_sha256"] for row in cand.results for j in row["judgments"]}}
    c = compare_runs(base, cand, CALIBRATED_GATE, grading=Grading(only_cand), n_perm=2000)
    (cell,) = c.cells
    raw = compare_runs(base, cand, GateSettings(metric="correctness"), n_perm=2000).cells[0]
    assert cell.estimate == PAIRED and (cell.delta, cell.p_value, cell.ci_low) == (raw.delta, raw.p_value, raw.ci_low)
    assert cell.notes == ("bm25@5: correctness not calibrated, the base run has 0 grade(s) of correctness in this "
                          "cell, fewer than min_grades 10: paired test on the raw judge scores",)
    assert "  * bm25@5: correctness not calibrated, the base run has 0 grade(s)" in format_comparison(c)
    # min_grades is the judge settings': 40 grades are too few under 50.
    high = compare_runs(base, cand, CALIBRATED_GATE, grading=Grading(grading.grades, min_grades=50), n_perm=2000)
    assert high.cells[0].estimate == PAIRED and "has 40 grade(s)" in high.cells[0].notes[0]


def test_the_joint_correction_gives_calibrated_cells_a_bonferroni_share() -> None:
    moved = pd.Series([1.0, 1.0, 1.0], index=["a", "b", "c"])  # three questions up: exact p = 2/8
    still = pd.Series([0.0, 0.0, 0.0], index=["a", "b", "c"])
    # Alone, the joint family is its own p-values.
    assert corrected([0.25, 1.0], [moved, still], "joint", n_perm=1000, seed=0) == [0.25, 1.0]
    # Beside one calibrated cell (no differences), three tests: the joint family holds alpha * 2/3, the calibrated
    # cell alpha / 3.
    assert corrected([0.25, 1.0, 0.01], [moved, still, None], "joint", n_perm=1000, seed=0) == pytest.approx(
        [0.375, 1.0, 0.03])
    assert corrected([0.25, None, 0.01], [moved, None, None], "joint", n_perm=1000, seed=0) == pytest.approx(
        [0.5, None, 0.02])
    # The marginal corrections treat a calibrated p-value as any other.
    assert corrected([0.25, 0.01], [moved, None], "holm", n_perm=1000, seed=0) == pytest.approx([0.25, 0.02])


def trust_runs(tmp_path: Path, person: np.ndarray) -> tuple[Run, Run, Grading]:
    """Two identical runs whose judge gave SCORES; the person graded the first 30 answers `person`; each cell also has
    json_v2_score and ndcg@k."""
    inputs = [f"answer {q}" for q in IDS]
    extra = {"json_v2_score": [80.0] * N, "ndcg@k": [0.5] * N}
    base = judged_run(tmp_path / "base", SCORES, inputs, extra)
    cand = judged_run(tmp_path / "cand", SCORES, inputs, extra)
    return base, cand, Grading(grades_of(inputs, person, np.arange(30)))


SCORES = np.random.default_rng(7).choice(6, size=N)


def test_an_untrusted_judge_hands_the_cell_to_its_next_metric_and_says_so(tmp_path: Path) -> None:
    person = np.random.default_rng(8).choice(6, size=N)  # grades that have nothing to do with the judge
    a = agreement(SCORES[:30], person[:30])
    assert a.n == 30 and a.kappa < 0.4
    base, cand, grading = trust_runs(tmp_path, person)
    c = compare_runs(base, cand, grading=grading, n_perm=2000)
    (cell,) = c.cells
    reason = f"not trusted: kappa {a.kappa:.2f} < 0.4, the judge agrees too little with the person (30 grades)"
    assert cell.metric == "json_v2_score"
    assert [(s.metric, s.why, s.kappa, s.n) for s in cell.skipped] == [
        ("correctness", f"its judge is {reason}", pytest.approx(a.kappa), 30)]
    note = f"bm25@5: correctness not used, its judge is {reason}; judged on json_v2_score"
    assert cell.notes == (note,)
    assert f"  * {note}" in format_comparison(c) and f"- {note}" in comparison_markdown(c)
    document = c.as_json()
    assert document["cells"][0]["skipped"] == [{"metric": "correctness", "why": f"its judge is {reason}",
                                                "kappa": pytest.approx(a.kappa), "n": 30}]
    assert document["judges"] == [{"judge": "correctness", "n": 30, "kappa": pytest.approx(a.kappa),
                                   "trusted": False, "reason": reason}]
    # An explicit correctness gate falls back to the retrieval metric, the one no judge makes.
    explicit = compare_runs(base, cand, GateSettings(metric="correctness"), grading=grading, n_perm=2000)
    assert explicit.cells[0].metric == "ndcg@k" and explicit.cells[0].skipped[0].metric == "correctness"
    # Fewer grades than min_grades say nothing against the judge.
    few = compare_runs(base, cand, grading=Grading(grading.grades, min_grades=31), n_perm=2000)
    assert few.cells[0].metric == "correctness" and few.cells[0].skipped == ()
    assert few.judges[0].trusted and few.judges[0].reason == "30 grade(s), fewer than min_grades 31: trust not judged"
    # A lenient threshold trusts it.
    lenient = compare_runs(base, cand, grading=Grading(grading.grades, trust_kappa=-1.0), n_perm=2000)
    assert lenient.cells[0].metric == "correctness"


def test_a_trusted_judge_keeps_its_metric(tmp_path: Path) -> None:
    person = SCORES.copy()
    person[:3] = (person[:3] + 1) % 6  # three disagreements in thirty
    a = agreement(SCORES[:30], person[:30])
    assert a.kappa >= 0.4
    base, cand, grading = trust_runs(tmp_path, person)
    c = compare_runs(base, cand, grading=grading, n_perm=2000)
    assert (c.cells[0].metric, c.cells[0].skipped, c.cells[0].notes) == ("correctness", (), ())
    assert [(j.judge, j.n, j.trusted) for j in c.judges] == [("correctness", 30, True)]
    assert c.judges[0].reason == f"trusted: kappa {a.kappa:.2f} >= 0.4 (30 grades)"
    assert "not used" not in format_comparison(c)


def test_the_ranking_passes_over_an_untrusted_judge_as_the_gate_does(tmp_path: Path) -> None:
    untrusted = np.random.default_rng(8).choice(6, size=N)
    _, cand, grading = trust_runs(tmp_path, untrusted)
    assert [r.metric for r in rank_retrievers(cand, grading=grading, n_perm=200)] == ["json_v2_score"]
    assert [r.metric for r in rank_retrievers(cand, n_perm=200)] == ["correctness"]  # no grades: nothing against it
    _, cand, grading = trust_runs(tmp_path / "trusted", SCORES.copy())
    assert [r.metric for r in rank_retrievers(cand, grading=grading, n_perm=200)] == ["correctness"]
