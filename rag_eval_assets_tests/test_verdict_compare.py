"""compare_runs on runs written with write_run: the gate metric per cell, noise-aware failures, the verdict and its
exit codes, invariants, flips and comparison.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.reports.comparison import comparison_markdown, format_comparison
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.runs.contents import metrics_document, run_config
from rag_eval_assets.runs.store import Run, read_run
from rag_eval_assets.runs.versions import VersionTuple
from rag_eval_assets.verdict.compare import BETTER, INCOMPATIBLE, NO_CHANGE, UNDEFINED, WORSE, compare_runs
from rag_eval_assets.verdict.corrections import adjust_p_values
from rag_eval_assets.verdict.settings import GateSettings

N = 60
IDS = [f"q{i:03d}" for i in range(N)]
Cell = tuple[str, int]


def config(evalset: str = "e" * 64, judge: dict | None = None, chunk_size: int = 800) -> dict:
    versions = (
        VersionTuple()
        .with_part("dataset", evalset_sha256=evalset, corpus_sha256="c" * 64)
        .with_part("index", chunk_size_chars=chunk_size, overlap_chars=100)
    )
    if judge is not None:
        versions = versions.with_part("judge", **judge)
    return run_config(versions)


def crafted_run(
    runs_dir: Path,
    run_id: str,
    values: dict[Cell, list[float]],
    *,
    cfg: dict | None = None,
    metric: str = "ndcg@k",
    extra: dict[tuple[Cell, str], list[float]] | None = None,
    weights: dict[str, float] | None = None,
    call_health: list[dict] | None = None,
    rows_with: Callable[[dict], dict] | None = None,
) -> Run:
    """A run whose per-question `metric` values are `values[(retriever, k)]` (question i -> IDS[i]), plus the
    per-question values of `extra[(cell, metric)]`; aggregates by aggregate_metrics."""
    per_cell: dict[Cell, dict[str, list[float]]] = {}
    for cell, column in values.items():
        per_cell.setdefault(cell, {})[metric] = column
    for (cell, name), column in (extra or {}).items():
        per_cell.setdefault(cell, {})[name] = column
    rows, per_query = [], []
    for (retriever, k), columns in per_cell.items():
        for i, query_id in enumerate(IDS):
            cell_metrics = {name: (None if np.isnan(column[i]) else column[i]) for name, column in columns.items()}
            rows.append({"query_id": query_id, "question": f"Question {query_id}?", "retriever": retriever, "k": k,
                         "weight": (weights or {}).get(query_id, 1.0), "metrics": cell_metrics})
            rows[-1] = rows_with(rows[-1]) if rows_with else rows[-1]
            per_query += [(query_id, retriever, k, name, column[i]) for name, column in columns.items()]
    per_query = pd.DataFrame(per_query, columns=["query_id", "retriever", "k", "metric", "value"])
    aggregate = aggregate_metrics(per_query, pd.DataFrame({"query_id": IDS}), slices=(), n_boot=100)
    document = metrics_document(aggregate)
    if call_health is not None:
        document["call_health"] = call_health
    path = write_run(runs_dir, results=rows, metrics=document, config=cfg or config(), run_id=run_id)
    return read_run(path)


def hits(successes: set[int]) -> list[float]:
    return [1.0 if i in successes else 0.0 for i in range(N)]


BASE = set(range(0, 40))  # 40 of 60 questions found
HIT = GateSettings(metric="hit@k")


@pytest.fixture()
def base(tmp_path: Path) -> Run:
    return crafted_run(tmp_path, "base", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)})


def test_identical_runs_are_no_significant_change(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)})
    c = compare_runs(base, cand)
    assert (c.verdict, c.exit_code, c.incompatible, c.failures) == (NO_CHANGE, 0, (), [])
    assert c.regressions == () and c.improvements == () and c.config_changes == ()
    assert [(g.retriever, g.k, g.metric, g.delta, g.p_value, g.p_adjusted, g.result) for g in c.cells] == [
        ("bm25", 5, "ndcg@k", 0.0, 1.0, 1.0, NO_CHANGE),
        ("dense", 5, "ndcg@k", 0.0, 1.0, 1.0, NO_CHANGE),
    ]
    text = format_comparison(c)
    assert text.startswith("Verdict: NO SIGNIFICANT CHANGE (exit 0): candidate cand against base base; no cell of 2")


def test_noise_passes_and_a_real_drop_is_worse(tmp_path: Path, base: Run) -> None:
    three_lost = crafted_run(tmp_path, "three", {("bm25", 5): hits(BASE - {0, 1, 2}), ("dense", 5): hits(BASE)})
    c = compare_runs(base, three_lost, GateSettings(max_regressions=0))
    bm25 = c.cells[0]
    # 3 of 60 lost: an exact sign-flip p of 2/8 = 0.25 cannot be told from noise.
    assert bm25.delta == pytest.approx(-3 / 60) and bm25.p_value == pytest.approx(0.25, abs=0.02)
    assert (c.verdict, c.exit_code, bm25.result, bm25.significant, bm25.regressions) == (NO_CHANGE, 0, NO_CHANGE,
                                                                                         False, 3)
    # Regressions of a cell whose change is not significant are not counted against it.
    assert c.regressions == () and c.all_regressions == 3
    # Asked to count every change, the same drop fails.
    strict = compare_runs(base, three_lost, GateSettings(max_regressions=0, significant_only=False))
    # The joint correction: dense did not move, so bm25 pays nothing for it.
    assert strict.cells[0].p_adjusted == strict.cells[0].p_value
    # Two cells, Holm: the smaller p-value doubled, though dense could never have been significant.
    holm = compare_runs(base, three_lost, GateSettings(max_regressions=0, significant_only=False, correction="holm"))
    assert holm.cells[0].p_adjusted == pytest.approx(2 * holm.cells[0].p_value)
    assert strict.verdict == WORSE and strict.failures == [
        "bm25@5: ndcg@k delta -0.0500 [-0.1071, +0.0000] is below min_delta 0.0 "
        f"(p_adj {strict.cells[0].p_adjusted:.3f})",
        "bm25@5: 3 regressions exceed max_regressions 0",
    ]
    assert [(f.query_id, f.question, f.base, f.cand) for f in strict.regressions] == [
        ("q000", "Question q000?", 1.0, 0.0), ("q001", "Question q001?", 1.0, 0.0), ("q002", "Question q002?", 1.0, 0.0)
    ]

    many_lost = crafted_run(tmp_path, "many", {("bm25", 5): hits(BASE - set(range(12))), ("dense", 5): hits(BASE)})
    c = compare_runs(base, many_lost)
    bm25 = c.cells[0]
    assert (c.verdict, c.exit_code, bm25.result) == (WORSE, 1, WORSE)
    assert bm25.delta == pytest.approx(-0.2) and bm25.ci_high < 0 and bm25.p_adjusted < 0.001
    assert [f"{g.retriever}@{g.k}" for g in c.deciding_cells] == ["bm25@5"]
    assert format_comparison(c).startswith("Verdict: WORSE (exit 1): candidate many against base base; decided by "
                                           "bm25@5 ndcg@k 0.667 -> 0.467 (-0.200")


def test_a_worse_verdict_names_its_regressions_even_when_nothing_flips(tmp_path: Path) -> None:
    # nDCG 1.0 -> 0.7 on twenty questions: each still a success (>= 0.5), so no flip, yet the cell is worse.
    base = crafted_run(tmp_path, "base", {("bm25", 10): [1.0] * N, ("dense", 10): [1.0] * N})
    cand = crafted_run(tmp_path, "cand", {("bm25", 10): [0.7] * 20 + [1.0] * 40, ("dense", 10): [1.0] * N})
    c = compare_runs(base, cand)
    bm25 = c.cells[0]
    assert (c.verdict, bm25.result, bm25.regressions, bm25.drops) == (WORSE, WORSE, 0, 20)
    assert [(f.query_id, f.flip, f.diff) for f in c.regressions] == [
        (q, False, pytest.approx(-0.3)) for q in IDS[:20]]
    assert c.improvements == () and c.evidence[0].drops == 20 and c.evidence[0].flips_down == 0
    text = format_comparison(c)
    assert "Top regressions (20 in the significant cells, 0 of them flips; 20 across all cells)" in text
    assert "  1 cell identical: dense@10" in text


def test_a_significant_gain_is_better(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE | set(range(40, 55)))})
    c = compare_runs(base, cand)
    assert (c.verdict, c.exit_code) == (BETTER, 0)
    assert [(g.retriever, g.result) for g in c.cells] == [("bm25", NO_CHANGE), ("dense", BETTER)]
    assert len(c.improvements) == 15 and c.cells[1].improvements == 15
    # A required gain larger than the one measured makes the same change a failure.
    assert compare_runs(base, cand, GateSettings(min_delta=0.3, significant_only=False)).verdict == WORSE


def test_holm_and_bonferroni_by_hand() -> None:
    # Holm: sorted p 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04, made non-decreasing -> 0.03, 0.06, 0.06.
    assert adjust_p_values([0.01, 0.04, 0.03, None], "holm") == pytest.approx([0.03, 0.06, 0.06, None])
    assert adjust_p_values([0.01, 0.04, 0.03, None], "bonferroni") == pytest.approx([0.03, 0.12, 0.09, None])
    assert adjust_p_values([0.01, 0.04], "none") == [0.01, 0.04]
    assert adjust_p_values([0.5, 0.6], "holm") == pytest.approx([1.0, 1.0])


def test_the_correction_spans_the_judged_cells(tmp_path: Path) -> None:
    cells = [("bm25", k) for k in (1, 3, 5, 10)]
    base = crafted_run(tmp_path, "base", {cell: hits(BASE) for cell in cells})
    # Each cell loses the same 6 questions: p = 2/64 alone, 4 x 2/64 = 0.125 once Holm corrects over four cells.
    cand = crafted_run(tmp_path, "cand", {cell: hits(BASE - set(range(6))) for cell in cells})
    corrected = compare_runs(base, cand, GateSettings(correction="holm"))
    assert all(g.p_value < 0.05 and g.p_adjusted > 0.1 and g.result == NO_CHANGE for g in corrected.cells)
    assert corrected.verdict == NO_CHANGE
    assert compare_runs(base, cand, GateSettings(correction="none")).verdict == WORSE
    # The joint correction flips each question in every cell at once: four identical cells are one test.
    joint = compare_runs(base, cand)
    assert [g.p_adjusted for g in joint.cells] == [2 / 64] * 4 and joint.verdict == WORSE


def test_the_auto_gate_metric_is_one_that_means_something_for_the_cell(tmp_path: Path) -> None:
    ndcg = {("bm25", 1): hits(BASE), ("bm25", 5): hits(BASE)}
    scores = [0.9] * N
    base = crafted_run(tmp_path, "base", ndcg, extra={(("bm25", 5), "question_score"): scores,
                                                      (("bm25", 5), "correctness"): [4.0] * N})
    cand = crafted_run(tmp_path, "cand", ndcg, extra={(("bm25", 5), "question_score"): scores,
                                                      (("bm25", 5), "correctness"): [4.0] * N})
    c = compare_runs(base, cand)
    assert [(g.k, g.metric) for g in c.cells] == [(1, "ndcg@k"), (5, "weighted_score")]
    judged = crafted_run(tmp_path, "judged", ndcg, extra={(("bm25", 5), "correctness"): [4.0] * N})
    assert [(g.k, g.metric) for g in compare_runs(judged, judged).cells] == [(1, "ndcg@k"), (5, "correctness")]
    json_v2 = crafted_run(tmp_path, "json", ndcg, extra={(("bm25", 5), "json_v2_score"): [80.0] * N})
    assert [(g.k, g.metric) for g in compare_runs(json_v2, json_v2).cells] == [(1, "ndcg@k"), (5, "json_v2_score")]
    assert [g.metric for g in compare_runs(base, cand, GateSettings(metric="hit@k")).cells] == [None, None]
    assert [g.metric for g in compare_runs(base, cand, GateSettings(retrieval_metric="question_score")).cells] == [
        None, "weighted_score"]
    # Success on a judge score is half its 0-5 scale: 4 -> 2 is a regression.
    dropped = crafted_run(tmp_path, "dropped", ndcg, extra={(("bm25", 5), "correctness"): [2.0] * 20 + [4.0] * 40})
    c = compare_runs(judged, dropped)
    assert (c.verdict, c.cells[1].metric, c.cells[1].regressions) == (WORSE, "correctness", 20)


def test_an_answer_metric_cell_shows_both_answers_with_their_judge_scores_and_grades(tmp_path: Path) -> None:
    from rag_eval_assets.judging.grades import Grade, GradeKey
    from rag_eval_assets.judging.grading import Grading
    from rag_eval_assets.reports.evidence import evidence_text
    from rag_eval_assets.verdict.evidence import evidence_record

    def answered(role: str, scores: list[float]) -> Callable[[dict], dict]:
        def add(row: dict) -> dict:
            score = scores[IDS.index(row["query_id"])]
            return {**row, "answer": {"text": f"{role} answer {row['query_id']}"},
                    "judgments": [{"judge": "correctness", "score": score, "replicate": 0,
                                   "judge_input_sha256": f"{role}-{row['query_id']}"}]}
        return add

    before, after = [4.0] * N, [2.0] * 20 + [4.0] * 40
    base = crafted_run(tmp_path, "base", {}, extra={(("bm25", 5), "correctness"): before},
                       rows_with=answered("base", before))
    cand = crafted_run(tmp_path, "cand", {}, extra={(("bm25", 5), "correctness"): after},
                       rows_with=answered("cand", after))
    # A person graded the candidate's first answer 1 (one grade says nothing against the judge: it stays trusted).
    grade = Grade("q000", "correctness", "cand-q000", 1, "correctness-v1")
    c = compare_runs(base, cand, grading=Grading({GradeKey("q000", "correctness", "cand-q000"): grade}))
    (evidence,) = c.evidence
    assert (c.verdict, evidence.metric, evidence.drops) == (WORSE, "correctness", 20)
    first = evidence.questions[0]
    assert first.change.query_id == "q000" and first.change.diff == -2.0
    assert (first.base_answer.text, dict(first.base_answer.judge_scores), dict(first.base_answer.grades)) == (
        "base answer q000", {"correctness": 4.0}, {})
    assert (first.cand_answer.text, dict(first.cand_answer.judge_scores), dict(first.cand_answer.grades)) == (
        "cand answer q000", {"correctness": 2.0}, {"correctness": 1.0})
    lines = evidence_text(evidence_record(evidence), full=True)
    assert "  base answer [correctness 4]: base answer q000" in lines
    assert "  cand answer [correctness 2 (graded 1)]: cand answer q000" in lines


def test_the_weighted_score_cell_weighs_questions(tmp_path: Path) -> None:
    weights = {"q000": 10.0}
    base = crafted_run(tmp_path, "base", {("bm25", 5): [1.0] * N}, metric="question_score", weights=weights)
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): [0.0] + [1.0] * (N - 1)}, metric="question_score",
                       weights=weights)
    cell = compare_runs(base, cand).cells[0]
    # One question of weight 10 among 59 of weight 1 loses its whole score: 69 -> 59 of 69.
    assert (cell.metric, cell.base, cell.cand) == ("weighted_score", 1.0, pytest.approx(59 / 69))
    assert cell.delta == pytest.approx(-10 / 69) and cell.regressions == 1


def test_an_undefined_cell_is_never_ok(tmp_path: Path) -> None:
    undefined = [np.nan] * N
    base = crafted_run(tmp_path, "base", {("bm25", 5): hits(BASE), ("bm25", 10): undefined})
    c = compare_runs(base, base)
    assert [(g.k, g.result) for g in c.cells] == [(5, NO_CHANGE), (10, UNDEFINED)]
    assert c.cells[1].reasons == (
        "the gate metric auto (ndcg@k or an answer metric) has no value for any question in both runs",)
    assert "undefined: the gate metric auto" in format_comparison(c)
    nothing = crafted_run(tmp_path, "nothing", {("bm25", 10): undefined})
    c = compare_runs(nothing, nothing)
    assert (c.verdict, c.exit_code) == (INCOMPATIBLE, 2)
    assert c.incompatible == ("no retriever and k has a value of the gate metric (auto) in both runs",)


def test_a_metric_whose_calls_failed_is_not_compared(tmp_path: Path) -> None:
    ndcg = {("bm25", 5): hits(BASE)}
    health = [{"stage": "judge", "metric": "correctness", "retriever": "bm25", "k": 5, "calls": 60, "errors": 30,
               "abstained": 0, "error_rate": 0.5, "first_error": "HTTP 500"}]
    base = crafted_run(tmp_path, "base", ndcg, extra={(("bm25", 5), "correctness"): [4.0] * N})
    cand = crafted_run(tmp_path, "cand", ndcg, extra={(("bm25", 5), "correctness"): [1.0] * N}, call_health=health)
    c = compare_runs(base, cand)
    assert (c.cells[0].metric, c.verdict) == ("ndcg@k", NO_CHANGE)
    assert c.warnings == ("bm25@5: correctness not compared: 30 of 60 judge calls failed (50% > 5%) in the "
                          "candidate run",)
    assert compare_runs(base, cand, GateSettings(max_error_rate=0.6)).verdict == WORSE


def test_an_invariant_mismatch_is_incompatible_naming_the_field_and_both_values(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)}, cfg=config("f" * 64))
    c = compare_runs(base, cand)
    assert (c.verdict, c.exit_code) == (INCOMPATIBLE, 2)
    assert c.incompatible == (
        f"invariant evalset_sha256 (version_tuple.dataset.evalset_sha256) differs: base={'e' * 64!r}, "
        f"candidate={'f' * 64!r}",
    )
    assert format_comparison(c).startswith("Verdict: INCOMPATIBLE (exit 2)")
    ignored = compare_runs(base, cand, ignore_invariants=True)
    assert ignored.exit_code == 0 and ignored.warnings[0].startswith("ignored: invariant evalset_sha256")
    assert [(ch.key, ch.base, ch.cand) for ch in ignored.config_changes] == [
        ("config_hash", base.config["config_hash"], cand.config["config_hash"]),
        ("version_tuple.dataset.evalset_sha256", "e" * 64, "f" * 64),
    ]


def test_judge_invariants(tmp_path: Path) -> None:
    judge = {"model": "qwen2.5-14b", "prompt_version": "v1", "temperature": 0.0}
    values = {("bm25", 5): hits(BASE)}
    base = crafted_run(tmp_path, "base", values, cfg=config(judge=judge))
    warm = crafted_run(tmp_path, "warm", values, cfg=config(judge={**judge, "temperature": 0.7}))
    c = compare_runs(base, warm)
    assert c.exit_code == 2
    assert c.incompatible == (
        "invariant judge_temperature (version_tuple.judge.temperature) differs: base=0.0, candidate=0.7",
    )
    other = crafted_run(tmp_path, "other", values, cfg=config(judge={**judge, "model": "gpt-4o", "prompt_version": "v2"}))
    assert [m.split(" (")[0] for m in compare_runs(base, other).incompatible] == [
        "invariant judge_model",
        "invariant judge_prompt_version",
    ]
    # A retrieval-only run has no judge metrics: nothing judge-made to compare, so only a warning.
    plain = crafted_run(tmp_path, "plain", values)
    c = compare_runs(plain, base)
    assert c.exit_code == 0 and c.warnings[0].startswith("only the candidate run used a judge")


def test_chunking_change_is_a_configuration_difference_not_an_invariant(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)}, cfg=config(chunk_size=400))
    c = compare_runs(base, cand)
    assert c.exit_code == 0
    assert ("version_tuple.index.chunk_size_chars", 800, 400) in [(ch.key, ch.base, ch.cand) for ch in c.config_changes]
    assert "version_tuple.index.chunk_size_chars: 800 -> 400" in format_comparison(c)


def test_every_delta_carries_its_paired_test(tmp_path: Path, base: Run) -> None:
    rng = np.random.default_rng(7)
    # dense: 15 failures turned into successes, none lost; bm25: 6 won and 6 lost at random.
    swapped = set(rng.choice(sorted(BASE), 6, replace=False)) | set(range(40, 46))
    cand = crafted_run(
        tmp_path, "cand", {("bm25", 5): hits(BASE ^ swapped), ("dense", 5): hits(BASE | set(range(40, 55)))}
    )
    c = compare_runs(base, cand)
    by_retriever = {d.retriever: d for d in c.deltas}
    assert by_retriever["dense"].delta == pytest.approx(15 / 60) and by_retriever["dense"].p_value < 0.001
    assert by_retriever["bm25"].delta == 0.0 and by_retriever["bm25"].p_value == 1.0
    assert by_retriever["dense"].n_pairs == 60 and by_retriever["dense"].ci_low > 0
    # Regressions and improvements are listed in the same cells, those whose change counts (dense's): bm25's six
    # losses and six gains are counted apart, never listed on one side only.
    assert (c.all_regressions, c.all_improvements) == (6, 6 + 15)
    assert (len(c.regressions), len(c.improvements)) == (0, 15)


def test_comparison_json_and_markdown(tmp_path: Path, base: Run) -> None:
    many_lost = crafted_run(tmp_path, "many", {("bm25", 5): hits(BASE - set(range(12))), ("dense", 5): hits(BASE)})
    c = compare_runs(base, many_lost, GateSettings(max_regressions=2))
    document = json.loads(json.dumps(c.as_json()))
    assert (document["verdict"], document["exit_code"], document["base_run_id"], document["cand_run_id"]) == (
        WORSE, 1, "base", "many")
    assert document["gate"] == {"metric": "auto", "retrieval_metric": "ndcg@k", "min_delta": 0.0,
                                "max_regressions": 2, "alpha": 0.05, "correction": "joint", "significant_only": True,
                                "max_error_rate": 0.05, "retrievers": None, "calibrated": False,
                                "top_questions": 10}
    bm25 = document["cells"][0]
    assert set(bm25) >= {"retriever", "k", "metric", "base", "cand", "delta", "ci_low", "ci_high", "p_value",
                         "p_adjusted", "significant", "regressions", "result"}
    assert (bm25["retriever"], bm25["k"], bm25["metric"], bm25["result"], bm25["regressions"]) == (
        "bm25", 5, "ndcg@k", WORSE, 12)
    assert bm25["significant"] is True and bm25["delta"] == pytest.approx(-0.2)
    assert document["deciding_cells"] == ["bm25@5"]
    assert [f["query_id"] for f in document["top_regressions"]] == [f"q{i:03d}" for i in range(10)]
    assert (document["regressions"], document["improvements"], document["identical_cells"]) == (12, 0, ["dense@5"])
    # The deciding cell's evidence: its twelve drops (all flips), the ten listed largest first, ties by id; these
    # crafted runs kept no retrieved lists, and the evidence says so rather than marking nothing.
    (evidence,) = document["evidence"]
    assert (evidence["retriever"], evidence["k"], evidence["drops"], evidence["flips_down"], evidence["gains"]) == (
        "bm25", 5, 12, 12, 0)
    assert [q["change"]["query_id"] for q in evidence["questions"]] == [f"q{i:03d}" for i in range(10)]
    assert all(q["change"]["diff"] == -1.0 and not q["gold_recorded"] for q in evidence["questions"])
    markdown = comparison_markdown(c)
    assert markdown.startswith("**Verdict: WORSE (exit 1)")
    assert "| bm25@5 | ndcg@k | 0.6667 | 0.4667 | -0.2000 |" in markdown
    assert "| bm25@5 | ndcg@k | q000 | 1.000 -> 0.000 | success -> failure | Question q000? |" in markdown
    assert "_1 cell identical: dense@5_" in markdown and "| dense@5 |" not in markdown
    assert ("### Evidence: bm25@5 ndcg@k (worse): 12 questions down (12 success → failure), 0 up (0 failure → "
            "success); the 10 that moved it most, drops first") in markdown
    assert ("| q000 | 1.0000 | 0.0000 | -1.0000 | success → failure | not recorded in these runs | Question q000? |"
            in markdown)


def test_write_run_records_the_comparison_with_its_baseline(tmp_path: Path, base: Run) -> None:
    rows = [dict(r) for r in base.results]
    rows[0] = {**rows[0], "metrics": {"ndcg@k": 0.0}}
    path = write_run(tmp_path, results=rows, metrics=base.metrics, config=base.config, previous=base.path,
                     run_id="next")
    run = read_run(path)
    assert run.comparison["verdict"] == NO_CHANGE and run.comparison["base_run_id"] == "base"
    assert (path / "comparison.md").read_text(encoding="utf-8").startswith("**Verdict: NO SIGNIFICANT CHANGE")
    assert "**Verdict: NO SIGNIFICANT CHANGE (exit 0): candidate next against base base" in run.summary
    first = read_run(base.path)
    assert first.comparison is None and not (base.path / "comparison.json").exists()


def test_the_ranking_sentence_names_the_best_and_the_set_of_those_that_may_be_the_best() -> None:
    from rag_eval_assets.verdict.ranking import KRanking, RankedRetriever

    a = RankedRetriever("hybrid", 0.716, 0.69, 0.74, 300, 1.0, True)
    b = RankedRetriever("bm25", 0.677, 0.65, 0.70, 300, 0.012, False)
    c = RankedRetriever("dense", 0.601, 0.57, 0.63, 300, 0.0001, False)
    alone = KRanking(10, "ndcg@k", (a, b, c), 0.05)
    assert alone.best_set == ("hybrid",)
    assert alone.sentence() == ("k=10: hybrid best, ndcg@k 0.716 vs bm25 0.677; the only one that may be the best at "
                                "alpha 0.05 (others p <= 0.012)")
    far = KRanking(10, "ndcg@k", (a, RankedRetriever("bm25", 0.5, 0.4, 0.6, 300, 0.0002, False)), 0.05)
    assert far.sentence().endswith("(others p < 0.001)")
    two = KRanking(10, "ndcg@k", (a, RankedRetriever("bm25", 0.677, 0.65, 0.70, 300, 0.2, True), c), 0.1)
    assert two.sentence() == ("k=10: hybrid best, ndcg@k 0.716 vs bm25 0.677; 2 variants may be the best at alpha "
                              "0.1: hybrid, bm25")
    many = KRanking(5, "hit@k", tuple(RankedRetriever(f"bm25_k1-{i}", 0.9 - i / 100, 0.8, 0.95, 60, 0.5, True)
                                      for i in range(10)), 0.05)
    assert many.sentence() == ("k=5: bm25_k1-0 best, hit@k 0.900 vs bm25_k1-1 0.890; 10 variants may be the best at "
                               "alpha 0.05 (all): " + ", ".join(f"bm25_k1-{i}" for i in range(8)) + " and 2 more")
    assert KRanking(5, "hit@k", (a,), 0.05).sentence() == "k=5: hybrid alone, hit@k 0.716"
    # Every retriever tied at the top: the tie says it all.
    same = tuple(RankedRetriever(name, 0.75, 0.6, 0.9, 60, 1.0, True) for name in ("a", "b", "c"))
    assert KRanking(5, "hit@k", same, 0.05).sentence() == "k=5: a, b and c tie at 0.750 (hit@k)"
    # A tie beside others that may be the best too.
    beside = (*same[:2], RankedRetriever("c", 0.7, 0.6, 0.9, 60, 0.3, True), c)
    assert KRanking(5, "hit@k", beside, 0.05).sentence() == (
        "k=5: a and b tie at 0.750 (hit@k); 3 variants may be the best at alpha 0.05: a, b, c")


def test_a_tie_is_called_a_tie_in_the_ranking_and_in_summary_md(tmp_path: Path) -> None:
    from rag_eval_assets.verdict.ranking import rank_retrievers

    same = hits(set(range(45)))
    run = crafted_run(tmp_path, "tie", {("dense", 5): same, ("hybrid", 5): same, ("bm25", 5): hits(BASE)})
    (ranking,) = rank_retrievers(run)
    assert ranking.tied == ("dense", "hybrid")
    # bm25 finds 5 questions fewer and no other: 1 of the 32 sign patterns of those 5 is as extreme (p 1/32).
    assert [(r.retriever, r.p_best, r.may_be_best) for r in ranking.retrievers] == [
        ("dense", 1.0, True), ("hybrid", 1.0, True), ("bm25", 1 / 32, False)]
    assert ranking.sentence() == ("k=5: dense and hybrid tie at 0.750 (ndcg@k); no other may be the best at alpha "
                                  "0.05 (others p <= 0.031)")
    assert f"## Which retriever is best\n\n- {ranking.sentence()}\n\n### k=5" in run.summary
    assert "| 1 | dense | best | 1.000 | 0.7500 |" in run.summary
    assert "| 3 | bm25 |  | 0.031 | 0.6667 |" in run.summary


def test_the_ranking_is_over_the_questions_every_retriever_scored(tmp_path: Path) -> None:
    from rag_eval_assets.verdict.ranking import rank_retrievers

    # The last 20 questions are hard: bm25 fails them, and dense has no value there (a failed judge, say). Each on
    # its own questions, dense (36 of 40) would lead bm25 (40 of 60); on the 40 both scored bm25 finds all.
    dense = hits(set(range(36)))[:40] + [np.nan] * 20
    bm25 = hits(set(range(40)))
    (ranking,) = rank_retrievers(crafted_run(tmp_path, "gaps", {("dense", 5): dense, ("bm25", 5): bm25}))
    assert [(r.retriever, r.value, r.n) for r in ranking.retrievers] == [("bm25", 1.0, 40), ("dense", 0.9, 40)]
    # No question both scored: nothing to rank at that k.
    apart = crafted_run(tmp_path, "apart", {("dense", 5): [np.nan] * 30 + [1.0] * 30,
                                             ("bm25", 5): [1.0] * 30 + [np.nan] * 30})
    assert rank_retrievers(apart) == []


def test_a_broken_service_beside_unchanged_retrievers_is_worse(tmp_path: Path) -> None:
    # The trial that found the bug: 15 labelled questions (the others have no gold), bm25 / dense / hybrid untouched
    # and the team's service at four k; the service now returns a random chunk for most questions.
    labelled = 15
    ks = (1, 3, 5, 10)

    def column(found: set[int]) -> list[float]:
        return [1.0 if i in found else 0.0 if i < labelled else np.nan for i in range(N)]

    unchanged = {(r, k): column({0, 2, 3, 5, 8, 9, 11, 13}) for r in ("bm25", "dense", "hybrid") for k in ks}
    base = crafted_run(tmp_path, "base", {**unchanged, **{("http", k): column(set(range(11))) for k in ks}})
    broken = crafted_run(tmp_path, "broken", {**unchanged, **{("http", k): column({0, 1}) for k in ks}})
    joint = compare_runs(base, broken)
    http = [g for g in joint.cells if g.retriever == "http"]
    # Nine questions lost, none gained: exactly 2 / 2**9 alone; the twelve untouched cells cost nothing.
    assert [g.p_value for g in http] == [2 / 512] * 4 and [g.p_adjusted for g in http] == [2 / 512] * 4
    assert (joint.verdict, joint.exit_code) == (WORSE, 1) and len(joint.cells) == 16
    assert all(g.ci_high < 0 for g in http)
    # The gate table leads with the four deciding cells; the twelve untouched ones are one line.
    lines = format_comparison(joint).splitlines()
    head = lines.index(next(line for line in lines if line.startswith("  cell ")))
    assert [line.split()[0] for line in lines[head + 1:head + 5]] == ["http@1", "http@3", "http@5", "http@10"]
    assert lines[head + 5] == "  12 cells identical: bm25@1-10, dense@1-10, hybrid@1-10"
    assert [q.change.query_id for q in joint.evidence[0].questions] == [f"q{i:03d}" for i in range(2, 11)]
    # Holm divides by all sixteen cells: 16 x 2/512 = 0.0625, and the broken service passes.
    holm = compare_runs(base, broken, GateSettings(correction="holm"))
    assert [g.p_adjusted for g in holm.cells if g.retriever == "http"] == [pytest.approx(16 * 2 / 512)] * 4
    assert holm.verdict == NO_CHANGE
    # A team that ships only its service gates only the service; the settings line says so.
    only = compare_runs(base, broken, GateSettings(retrievers=("http",), correction="holm"))
    assert {g.retriever for g in only.cells} == {"http"} and only.verdict == WORSE
    assert "retrievers=http" in format_comparison(only)


def test_a_retriever_only_one_run_holds_is_named_not_passed_over(tmp_path: Path) -> None:
    # A sweep value changed renames its variants: their cells cannot be paired, and the comparison says so.
    base = crafted_run(tmp_path, "base", {("bm25_k1-0.9", 5): hits(BASE), ("bm25_k1-1.5", 5): hits(BASE)})
    cand = crafted_run(tmp_path, "cand", {("bm25_k1-0.9", 5): hits(BASE), ("bm25_k1-0.01", 5): hits(BASE)})
    c = compare_runs(base, cand)
    assert [cell.name for cell in c.cells] == ["bm25_k1-0.9@5"]
    assert "only in the base run, not compared: bm25_k1-1.5" in c.warnings
    assert "only in the candidate run, not compared: bm25_k1-0.01" in c.warnings
    # Restricted to the compared retrievers, the others are not named.
    assert not [w for w in compare_runs(base, cand, retrievers=["bm25_k1-0.9"]).warnings if w.startswith("only in")]
