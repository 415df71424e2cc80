"""`rag-eval benchmark` (seed 000, section 6): two datasets through the pipeline and one weighted score over them."""

import json
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def test_two_datasets_aggregate_by_weight(tmp_path):
    config = tmp_path / "bench.yaml"
    config.write_text(
        "name: sample-benchmark\n"
        "datasets:\n"
        f"  - {{name: report, corpus: {SAMPLE / 'corpus'}, evalset: {SAMPLE / 'evalsets' / 'questions.jsonl'}, weight: 3}}\n"
        f"  - {{name: notes, corpus: {SAMPLE / 'corpus'}, evalset: {SAMPLE / 'evalsets' / 'eval_set.jsonl'}, weight: 1}}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert main(["benchmark", "--config-file", str(config), "--out", str(out), "--retrievers", "bm25", "--k", "5"]) == 0
    report = json.loads((out / "benchmark.json").read_text(encoding="utf-8"))
    (cell,) = report["cells"]
    assert (cell["retriever"], cell["k"]) == ("bm25", 5)
    scores = {}
    for name in ("report", "notes"):
        table = pd.read_parquet(out / name / "store" / "assets" / "answer_metrics.parquet")
        row = table[(table.metric == "weighted_score") & (table.slice == "all")]
        scores[name] = row["value"].item()
    assert {d["name"]: d["weighted_score"] for d in cell["datasets"]} == pytest.approx(scores)
    assert cell["summary"]["weighted_score"] == pytest.approx((3 * scores["report"] + scores["notes"]) / 4)
    assert cell["summary"]["weighting"] == "weight"
