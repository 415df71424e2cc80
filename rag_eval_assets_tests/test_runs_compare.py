"""compare_runs on runs written with write_run: exit codes 0 / 1 / 2, invariants, flips, p-values and the gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.runs.compare import WEIGHTED_SCORE, compare_runs, comparison_markdown, format_comparison
from rag_eval_assets.runs.store import Run, metrics_document, read_run, run_config, write_run
from rag_eval_assets.runs.versions import VersionTuple

N = 60
IDS = [f"q{i:03d}" for i in range(N)]


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
    values: dict[tuple[str, int], list[float]],
    *,
    cfg: dict | None = None,
    metric: str = "hit@k",
    weighted: dict[tuple[str, int], float] | None = None,
) -> Run:
    """A run whose per-question `metric` values are `values[(retriever, k)]` (question i -> IDS[i]); aggregates by
    aggregate_metrics, plus weighted_score rows when given."""
    rows, per_query = [], []
    for (retriever, k), column in values.items():
        for query_id, value in zip(IDS, column):
            rows.append({"query_id": query_id, "question": f"Question {query_id}?", "retriever": retriever, "k": k,
                         "metrics": {metric: value}})
            per_query.append((query_id, retriever, k, metric, value))
    per_query = pd.DataFrame(per_query, columns=["query_id", "retriever", "k", "metric", "value"])
    aggregate = aggregate_metrics(per_query, pd.DataFrame({"query_id": IDS}), slices=(), n_boot=100)
    if weighted:
        extra = pd.DataFrame(
            [(r, k, "all", WEIGHTED_SCORE, v, np.nan, np.nan, N) for (r, k), v in weighted.items()],
            columns=aggregate.columns,
        )
        aggregate = pd.concat([aggregate, extra], ignore_index=True)
    path = write_run(runs_dir, results=rows, metrics=metrics_document(aggregate), config=cfg or config(),
                     run_id=run_id)
    return read_run(path)


def hits(successes: set[int]) -> list[float]:
    return [1.0 if i in successes else 0.0 for i in range(N)]


BASE = set(range(0, 40))  # 40 of 60 questions found


@pytest.fixture()
def base(tmp_path: Path) -> Run:
    return crafted_run(tmp_path, "base", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)})


def test_identical_runs_pass(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)})
    c = compare_runs(base, cand, min_delta=0.0, max_regressions=0)
    assert c.exit_code == 0 and c.incompatible == () and c.failures == []
    assert c.regressions == () and c.improvements == () and c.config_changes == ()
    assert [(g.retriever, g.k, g.metric, g.delta, g.p_value) for g in c.gate] == [
        ("bm25", 5, "hit@k", 0.0, 1.0),
        ("dense", 5, "hit@k", 0.0, 1.0),
    ]
    assert "PASSED (exit 0)" in format_comparison(c)


def test_regressions_fail_the_gate_with_exit_1(tmp_path: Path, base: Run) -> None:
    # bm25 loses q000-q002 and gains q050: three regressions, one improvement, delta -2/60.
    cand_bm25 = (BASE - {0, 1, 2}) | {50}
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(cand_bm25), ("dense", 5): hits(BASE)})
    c = compare_runs(base, cand, max_regressions=0)
    assert c.exit_code == 1
    assert [(f.query_id, f.question, f.retriever, f.k, f.base, f.cand) for f in c.regressions] == [
        ("q000", "Question q000?", "bm25", 5, 1.0, 0.0),
        ("q001", "Question q001?", "bm25", 5, 1.0, 0.0),
        ("q002", "Question q002?", "bm25", 5, 1.0, 0.0),
    ]
    assert [f.query_id for f in c.improvements] == ["q050"]
    bm25 = next(g for g in c.gate if g.retriever == "bm25")
    assert bm25.delta == pytest.approx(-2 / 60) and bm25.regressions == 3
    assert c.failures == [
        "bm25@5: hit@k delta -0.0333 is below min_delta 0.0",
        "bm25@5: 3 regressions exceed max_regressions 0",
    ]
    # Allowing three regressions and a small loss passes.
    assert compare_runs(base, cand, max_regressions=3, min_delta=-0.05).exit_code == 0
    # Gating on dense only passes: bm25 is not looked at.
    assert compare_runs(base, cand, max_regressions=0, retrievers=["dense"]).exit_code == 0
    text = format_comparison(c)
    assert "FAILED (exit 1)" in text and "q000" in text and "Question q000?" in text
    markdown = comparison_markdown(c)
    assert "**FAILED (exit 1)**" in markdown and "| bm25@5 | q000 | 1.000 -> 0.000 | Question q000? |" in markdown


def test_min_delta_requires_a_large_enough_gain(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE | {40}), ("dense", 5): hits(BASE | {40})})
    assert compare_runs(base, cand, min_delta=0.0, max_regressions=0).exit_code == 0
    c = compare_runs(base, cand, min_delta=0.05)
    assert c.exit_code == 1 and "hit@k delta +0.0167 is below min_delta 0.05" in c.failures[0]
    assert [f.query_id for f in c.improvements] == ["q040", "q040"]


def test_an_invariant_mismatch_is_exit_2_naming_the_field_and_both_values(tmp_path: Path, base: Run) -> None:
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)}, cfg=config("f" * 64))
    c = compare_runs(base, cand)
    assert c.exit_code == 2
    assert c.incompatible == (
        f"invariant evalset_sha256 (version_tuple.dataset.evalset_sha256) differs: base={'e' * 64!r}, "
        f"candidate={'f' * 64!r}",
    )
    assert "INCOMPATIBLE (exit 2)" in format_comparison(c) and "evalset_sha256" in format_comparison(c)
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


def test_weighted_score_is_the_gate_metric_when_both_runs_have_it(tmp_path: Path) -> None:
    base = crafted_run(tmp_path, "base", {("bm25", 5): hits(BASE)}, weighted={("bm25", 5): 0.80})
    # hit@k improves, but the weighted score drops: the gate follows the weighted score.
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(BASE | {41})}, weighted={("bm25", 5): 0.75})
    c = compare_runs(base, cand)
    assert c.exit_code == 1
    assert (c.gate[0].metric, c.gate[0].delta) == (WEIGHTED_SCORE, pytest.approx(-0.05))
    delta = next(d for d in c.deltas if d.metric == WEIGHTED_SCORE)
    assert (delta.base, delta.cand, delta.n_pairs, delta.p_value) == (0.80, 0.75, 0, None)


def test_significant_only_counts_a_cell_only_when_its_paired_test_is_significant(tmp_path: Path, base: Run) -> None:
    one_lost = crafted_run(tmp_path, "one", {("bm25", 5): hits(BASE - {0}), ("dense", 5): hits(BASE)})
    assert compare_runs(base, one_lost, max_regressions=0).exit_code == 1
    c = compare_runs(base, one_lost, max_regressions=0, significant_only=True)
    assert c.exit_code == 0 and c.gate[0].regressions == 1 and c.gate[0].p_value == 1.0
    many_lost = crafted_run(tmp_path, "many", {("bm25", 5): hits(BASE - set(range(12))), ("dense", 5): hits(BASE)})
    c = compare_runs(base, many_lost, max_regressions=0, significant_only=True)
    assert c.exit_code == 1 and c.gate[0].regressions == 12 and c.gate[0].p_value < 0.05


def test_p_values_of_the_deltas(tmp_path: Path, base: Run) -> None:
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
    assert len(c.regressions) == 6 and len(c.improvements) == 6 + 15


def test_missing_primary_metric_or_no_common_cell_is_exit_2(tmp_path: Path, base: Run) -> None:
    scored = crafted_run(tmp_path, "scored", {("bm25", 5): [0.9] * N}, metric="question_score")
    c = compare_runs(base, scored)
    assert c.exit_code == 2 and "primary metric 'hit@k' is not in the candidate run scored" in c.incompatible[0]
    other_k = crafted_run(tmp_path, "k10", {("bm25", 10): hits(BASE)})
    c = compare_runs(base, other_k)
    assert c.exit_code == 2 and c.incompatible[0].startswith("no retriever and k has 'hit@k'")
    # Success on a score: question_score >= 0.5.
    worse = crafted_run(tmp_path, "worse", {("bm25", 5): [0.9] * 50 + [0.4] * 10}, metric="question_score")
    c = compare_runs(scored, worse, primary_metric="question_score", max_regressions=5)
    assert c.exit_code == 1 and len(c.regressions) == 10 and c.regressions[0].cand == 0.4
