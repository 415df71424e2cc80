"""Charts: PNG files of the fixed size, drawn from a real run; a chart without data says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from rag_eval_assets.reports.charts import (
    plot_by_slice,
    plot_context_boxplots,
    plot_hit_bars,
    plot_hit_vs_k,
    plot_stage_costs,
)
from rag_eval_assets.reports.markdown import metrics_table_markdown
from rag_eval_assets.runs.store import Run, read_run
from rag_eval_assets_tests.test_runs_store import write_sample_run

WIDTH, HEIGHT = 900, 500


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG signature and IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def ink(path: Path) -> float:
    """Share of pixels that are not (near) white."""
    pixels = np.asarray(Image.open(path).convert("L"))
    return float(np.mean(pixels < 240))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return read_run(write_sample_run(tmp_path_factory.mktemp("runs")))


def test_every_chart_is_900_by_500_pixels(run: Run, tmp_path: Path) -> None:
    aggregate, per_query = run.aggregate_frame(), run.per_query_frame()
    charts = [
        plot_hit_bars(aggregate, tmp_path / "bars.png", k=3),
        plot_hit_vs_k(aggregate, tmp_path / "lines.png"),
        plot_context_boxplots(per_query, tmp_path / "box.png"),
        plot_by_slice(aggregate, tmp_path / "types.png", k=3),
        plot_stage_costs(run.stage_frame(), tmp_path / "stages.png"),
    ]
    for path in charts:
        assert path.stat().st_size > 5000, path
        assert png_size(path) == (WIDTH, HEIGHT), path
        assert ink(path) > 0.03, path


def test_missing_data_gives_a_not_computed_chart_of_the_same_size(run: Run, tmp_path: Path) -> None:
    per_query = run.per_query_frame()
    retrieval_only = per_query[~per_query["metric"].str.startswith("context_")]
    drawn = plot_context_boxplots(per_query, tmp_path / "box.png")
    placeholder = plot_context_boxplots(
        retrieval_only, tmp_path / "none.png", reasons={"context_precision": "no judge endpoint configured"}
    )
    assert png_size(placeholder) == (WIDTH, HEIGHT)
    # Text only: a small fraction of the pixels, far less than boxes and axes.
    assert 0 < ink(placeholder) < 0.02 < ink(drawn)
    aggregate = run.aggregate_frame()
    untyped = aggregate[~aggregate["slice"].str.startswith("type=")]
    for path in (
        plot_by_slice(untyped, tmp_path / "types.png", k=3),
        plot_hit_bars(aggregate, tmp_path / "bars.png", k=99),
        plot_hit_vs_k(aggregate, tmp_path / "lines.png", metric="ndcg@k_missing"),
        plot_stage_costs(pd.DataFrame(columns=["stage", "latency_s", "cost_usd"], dtype=float), tmp_path / "s.png"),
    ):
        assert png_size(path) == (WIDTH, HEIGHT) and ink(path) < 0.02, path


def test_metrics_table_markdown(run: Run) -> None:
    table = metrics_table_markdown(run.aggregate_frame(), metrics=["hit@k", "mrr@k"])
    lines = table.splitlines()
    assert lines[0] == "| retriever | k | hit@k | mrr@k |"
    assert len(lines) == 2 + 6  # header, rule, 2 retrievers x 3 k
    aggregate = run.aggregate_frame()
    value = aggregate[(aggregate["retriever"] == "dense") & (aggregate["k"] == 5) & (aggregate["slice"] == "all")
                      & (aggregate["metric"] == "hit@k")]["value"].item()
    assert f"| dense | 5 | {value:.3f} |" in table
