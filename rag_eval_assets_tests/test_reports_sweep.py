"""A sweep as summary.md and report.html show it (reports/ranking.py, sweep.py, charts.py plot_sweep): per k a table
of the variants by metric with the best and the confidence set of the best marked, and the gate metric against each
swept parameter, one line per value of another. The swept parameters are read from the variants' versions in
config.json, whatever they are: here k1, b and a variant's own chunking."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PIL import Image

from rag_eval_assets.reports.charts import CHARTS_DIR
from rag_eval_assets.reports.html import build_report
from rag_eval_assets.reports.ranking import BEST, IN_SET, OUT, best_records, variant_rows
from rag_eval_assets.reports.sweep import profile, sweeps, variant_versions
from rag_eval_assets.runs.contents import run_config
from rag_eval_assets.runs.store import Run
from rag_eval_assets.runs.versions import VersionTuple
from rag_eval_assets.verdict.ranking import rank_retrievers
from rag_eval_assets_tests.test_reports_charts import HEIGHT, WIDTH, png_size
from rag_eval_assets_tests.test_verdict_compare import N, crafted_run, hits

K1, B, CHUNK = (0.6, 0.9, 1.2), (0.3, 0.75), (400, 800)
BEST_NAME = "bm25_k1-1.2_b-0.75_c800"


def _found(k1: int, b: int, chunk: int) -> int:
    """Questions found (of 60, always the first ones): 45 by the best variant, each step down k1, b or the chunk
    size loses 5, 3 and 2."""
    return 30 + 5 * k1 + 3 * b + 2 * chunk


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    versions, values = {"dense": {"name": "dense", "kind": "dense", "model": "all-MiniLM-L6-v2"}}, {}
    values[("dense", 5)] = hits(set(range(38)))
    for (i, k1), (j, b), (c, size) in itertools.product(enumerate(K1), enumerate(B), enumerate(CHUNK)):
        name = f"bm25_k1-{k1}_b-{b}_c{size}"
        versions[name] = {"name": name, "kind": "bm25", "k1": k1, "b": b, "variant": "lucene",
                          "chunking": {"chunk_size_chars": size, "overlap_chars": 50}}
        values[(name, 5)] = hits(set(range(_found(i, j, c))))
    cfg = run_config(VersionTuple().with_part("dataset", evalset_sha256="e" * 64, corpus_sha256="c" * 64)
                     .with_part("retriever", retrievers=versions, k_values=[5]))
    extra = {(cell, "hit@k"): column for cell, column in values.items()}
    return crafted_run(tmp_path_factory.mktemp("runs"), "sweep", values, cfg=cfg, extra=extra)


def test_the_table_marks_the_best_and_the_set_and_shows_every_metric(sweep_run: Run) -> None:
    (ranking,) = rank_retrievers(sweep_run)
    assert ranking.retrievers[0].retriever == BEST_NAME and ranking.retrievers[0].value == pytest.approx(45 / N)
    members = set(ranking.best_set)
    # Two questions behind the best (the 400-character chunks) cannot be told from it; 15 behind is out.
    assert {BEST_NAME, "bm25_k1-1.2_b-0.75_c400"} <= members and "bm25_k1-0.6_b-0.3_c400" not in members
    rows = variant_rows(ranking, sweep_run.aggregate_frame())
    assert [row.mark for row in rows] == [BEST] + [IN_SET if r.may_be_best else OUT for r in ranking.retrievers[1:]]
    best = rows[0].cells
    assert best[:3] == ("1", BEST_NAME, BEST) and best[4] == "0.7500"
    # The other metric (hit@k) with its interval over its own questions.
    assert best[7].startswith("0.750 [") and len(best) == 8
    assert best_records([ranking]) == [{"k": 5, "metric": "ndcg@k", "best": BEST_NAME, "value": 0.75,
                                        "set_size": len(members), "may_be_best": ", ".join(ranking.best_set)}]


def test_the_swept_parameters_come_from_the_versions_and_each_point_is_the_best_with_those_values(sweep_run: Run):
    (ranking,) = rank_retrievers(sweep_run)
    (sweep,) = sweeps(sweep_run.config, ranking)  # dense is alone of its kind: no sweep
    # In config.json's key order (sorted); each chart's lines are the first other one.
    assert sweep.kind == "bm25" and sweep.parameters == ("b", "chunking.chunk_size_chars", "k1")
    assert len(sweep.frame) == len(K1) * len(B) * len(CHUNK)
    k1 = profile(sweep, "k1")
    # One line per b; each point the better chunking of that (k1, b).
    assert list(k1["line"]) == ["0.3"] * 3 + ["0.75"] * 3 and list(k1["x"]) == ["0.6", "0.9", "1.2"] * 2
    assert list(k1["value"]) == pytest.approx([_found(i, j, 1) / N for j in range(2) for i in range(3)])
    assert k1["retriever"].iloc[-1] == BEST_NAME
    chunk = profile(sweep, "chunking.chunk_size_chars")
    assert list(chunk["x"]) == ["400", "800"] * 2 and list(chunk["line"]) == ["0.3"] * 2 + ["0.75"] * 2
    assert list(chunk["value"]) == pytest.approx([_found(2, j, c) / N for j in range(2) for c in range(2)])


def test_summary_md_and_the_report_show_the_sweep(sweep_run: Run) -> None:
    summary = sweep_run.summary
    assert "## The sweep (k=5)" in summary
    assert "| k1 | b = 0.3 | b = 0.75 |" in summary
    # The best of (k1 1.2, b 0.3) is its 800-character variant: 42 of 60, bold when it may be the best.
    cell = "**0.7000**" if _in_set(sweep_run, "bm25_k1-1.2_b-0.3_c800") else "0.7000"
    assert f"| 1.2 | {cell} | **0.7500** |" in summary
    assert f"]({CHARTS_DIR}/sweep_bm25_k1.png)" in summary
    report = build_report(sweep_run)
    html = report.read_text(encoding="utf-8")
    assert html.index('id="ranking"') < html.index('id="sweep"') < html.index("Summary (all questions)")
    assert f'<tr data-retriever="{BEST_NAME}" class="best">' in html
    for name in ("sweep_bm25_k1", "sweep_bm25_b", "sweep_bm25_chunking_chunk_size_chars"):
        png = report.parent / CHARTS_DIR / f"{name}.png"
        assert png_size(png) == (WIDTH, HEIGHT) and f'data-chart="{name}"' in html
    # One line per b: matplotlib's first two colours, blue and orange, both drawn.
    pixels = np.asarray(Image.open(report.parent / CHARTS_DIR / "sweep_bm25_k1.png").convert("RGB")).astype(int)
    for colour in ((31, 119, 180), (255, 127, 14)):
        assert np.all(np.abs(pixels - colour) <= 12, axis=2).sum() > 200, colour


def _in_set(run: Run, name: str) -> bool:
    (ranking,) = rank_retrievers(run)
    return name in ranking.best_set


def test_a_variant_without_its_own_chunking_is_charted_at_the_top_level_one() -> None:
    cfg = run_config(VersionTuple().with_part("index", chunker_version="chars-v1", chunk_size_chars=800,
                                              overlap_chars=100)
                     .with_part("retriever", k_values=[5], retrievers={
                         "bm25": {"name": "bm25", "kind": "bm25", "k1": 0.9},
                         "bm25_300": {"name": "bm25_300", "kind": "bm25", "k1": 0.9,
                                      "chunking": {"chunk_size_chars": 300, "overlap_chars": 50}}}))
    versions = variant_versions(cfg)
    assert versions["bm25"]["chunking"] == {"chunk_size_chars": 800, "overlap_chars": 100}
    assert versions["bm25_300"]["chunking"] == {"chunk_size_chars": 300, "overlap_chars": 50}


def test_a_parameter_that_moves_in_step_with_another_is_not_charted_again(sweep_run: Run) -> None:
    # The fixture's overlap is 50 throughout; here it follows the chunk size (400-50, 800-100), as a sweep over
    # chunkings with their own overlaps does: one chart for the chunking, not a second with the same points.
    config = {**sweep_run.config, "version_tuple": {**sweep_run.config["version_tuple"], "retriever": {
        **sweep_run.config["version_tuple"]["retriever"], "retrievers": {
            name: ({**v, "chunking": {"chunk_size_chars": v["chunking"]["chunk_size_chars"],
                                      "overlap_chars": v["chunking"]["chunk_size_chars"] // 8}}
                   if "chunking" in v else v)
            for name, v in sweep_run.config["version_tuple"]["retriever"]["retrievers"].items()}}}}
    (ranking,) = rank_retrievers(sweep_run)
    (sweep,) = sweeps(config, ranking)
    assert sweep.parameters == ("b", "chunking.chunk_size_chars", "k1")
