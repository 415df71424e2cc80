"""A comparison.json record as the run_comparison table and its quality gate's description
(reports/comparison.py), and the ranking write_run hands on so that nothing ranks the retrievers twice."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.reports.comparison import COMPARISON_COLUMNS, comparison_frame, quality_gate_description
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.runs.store import COMPARISON_JSON, read_run
from rag_eval_assets.verdict.compare import INCOMPATIBLE, NO_CHANGE, WORSE
from rag_eval_assets.verdict.ranking import rank_retrievers
from rag_eval_assets_tests.test_verdict_compare import BASE, config, crafted_run, hits


def _compared(tmp_path: Path, bm25: set[int], cfg: dict | None = None) -> dict:
    base = crafted_run(tmp_path, "base", {("bm25", 5): hits(BASE), ("dense", 5): hits(BASE)},
                       extra={(("bm25", 5), "hit@k"): hits(BASE), (("dense", 5), "hit@k"): hits(BASE)})
    cand = crafted_run(tmp_path, "cand", {("bm25", 5): hits(bm25), ("dense", 5): hits(BASE)},
                       extra={(("bm25", 5), "hit@k"): hits(bm25), (("dense", 5), "hit@k"): hits(BASE)}, cfg=cfg)
    path = write_run(tmp_path, results=cand.results, metrics=cand.metrics, config=cand.config, previous=base.path,
                     run_id="next")
    return json.loads((path / COMPARISON_JSON).read_text(encoding="utf-8"))


def test_every_delta_is_a_row_and_the_gate_cells_carry_their_result(tmp_path: Path):
    comparison = _compared(tmp_path, BASE - set(range(12)))
    table = comparison_frame(comparison)
    assert list(table.columns) == list(COMPARISON_COLUMNS) and len(table) == len(comparison["deltas"]) == 4
    gate = table[table["gate"]].set_index("retriever")
    assert list(gate["metric"]) == ["ndcg@k", "ndcg@k"]
    assert (gate.loc["bm25", "result"], gate.loc["dense", "result"]) == (WORSE, NO_CHANGE)
    assert gate.loc["bm25", "delta"] == pytest.approx(-12 / 60) and gate.loc["bm25", "regressions"] == 12
    assert bool(gate.loc["bm25", "significant"]) and not bool(gate.loc["dense", "significant"])
    others = table[~table["gate"]]
    assert list(others["metric"]) == ["hit@k", "hit@k"]
    assert others["result"].isna().all() and others["p_adjusted"].isna().all() and others["regressions"].isna().all()
    assert table.dtypes["regressions"] == pd.Int64Dtype() and table.dtypes["significant"] == pd.BooleanDtype()

    bm25 = next(c for c in comparison["cells"] if c["retriever"] == "bm25")
    assert quality_gate_description(comparison) == f"worse: {bm25['reasons']}"


def test_the_description_of_a_passed_and_of_an_incompatible_gate(tmp_path: Path):
    assert quality_gate_description(_compared(tmp_path / "same", BASE)) == f"{NO_CHANGE} against base"
    other = _compared(tmp_path / "other", BASE, cfg=config(evalset="f" * 64))
    assert other["verdict"] == INCOMPATIBLE
    assert quality_gate_description(other) == (
        f"not judged: the runs are incompatible ({'; '.join(other['incompatible'])})")
    long = {**other, "incompatible": ["x" * 3000]}
    assert len(quality_gate_description(long)) == 2000


def test_write_run_hands_on_the_ranking_summary_md_shows(tmp_path: Path):
    run = crafted_run(tmp_path, "one", {("bm25", 5): hits(BASE), ("dense", 5): hits(set(range(50)))})
    rankings = []
    path = write_run(tmp_path, results=run.results, metrics=run.metrics, config=run.config, run_id="two",
                     rankings=rankings)
    assert rankings == rank_retrievers(read_run(path))
    assert [(r.k, [s.retriever for s in r.retrievers]) for r in rankings] == [(5, ["dense", "bm25"])]
    assert f"- {rankings[0].sentence()}" in read_run(path).summary
