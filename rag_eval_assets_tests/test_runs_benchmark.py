"""The multi-dataset benchmark configuration and its aggregated weighted score (seed 000 section 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.runs.benchmark import BenchmarkDataset, aggregate_benchmark, load_benchmark_config


def test_load_config_resolves_paths_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "report.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "data" / "notes").mkdir()
    (tmp_path / "eval").mkdir()
    for name in ("report.jsonl", "notes.jsonl"):
        (tmp_path / "eval" / name).write_text("{}\n", encoding="utf-8")
    config = {
        "name": "benchmark-v1",
        "datasets": [
            {"name": "report", "corpus": "data/report.pdf", "evalset": "eval/report.jsonl", "weight": 2},
            {"name": "notes", "corpus": "data/notes", "evalset": "eval/notes.jsonl", "weight": 0.5},
        ],
    }
    path = tmp_path / "config.v1.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    loaded = load_benchmark_config(path)
    assert loaded.name == "benchmark-v1"
    assert loaded.datasets == (
        BenchmarkDataset("report", tmp_path / "data" / "report.pdf", tmp_path / "eval" / "report.jsonl", 2.0),
        BenchmarkDataset("notes", tmp_path / "data" / "notes", tmp_path / "eval" / "notes.jsonl", 0.5),
    )


def test_load_config_reports_every_problem(tmp_path: Path) -> None:
    (tmp_path / "c.md").write_text("x", encoding="utf-8")
    (tmp_path / "q.jsonl").write_text("{}\n", encoding="utf-8")
    path = tmp_path / "bench.yaml"
    path.write_text(
        "datasets:\n"
        "  - {name: a, corpus: c.md, evalset: q.jsonl, weight: 1}\n"
        "  - {name: a, corpus: missing.pdf, evalset: q.jsonl, weight: -1, colour: red}\n"
        "  - {corpus: c.md}\n"
        "  - just a string\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        load_benchmark_config(path)
    found = [(p.line, p.field) for p in error.value.problems]
    assert found == [
        (1, "colour"),
        (1, "name"),
        (1, "corpus"),
        (1, "weight"),
        (2, "name"),
        (2, "evalset"),
        (3, None),
        (None, "weight"),
    ]
    assert all(p.file == str(path) for p in error.value.problems)
    with pytest.raises(InputError, match="non-empty list"):
        path.write_text("datasets: []\n", encoding="utf-8")
        load_benchmark_config(path)


def test_aggregate_is_weighted_by_dataset_weight() -> None:
    report = aggregate_benchmark(
        [
            {"name": "report", "weight": 3.0, "weighted_score": 0.9, "n": 10},
            {"name": "notes", "weight": 1.0, "weighted_score": 0.5, "n": 90},
        ]
    )
    assert report["summary"] == {
        "weighted_score": pytest.approx((3 * 0.9 + 1 * 0.5) / 4),
        "weighting": "weight",
        "datasets": 2,
        "questions": 100,
    }
    assert [(d["name"], d["share"]) for d in report["datasets"]] == [("report", 0.75), ("notes", 0.25)]


def test_without_weights_every_question_counts_the_same() -> None:
    report = aggregate_benchmark(
        [
            {"name": "report", "weight": None, "weighted_score": 0.9, "n": 10},
            {"name": "notes", "weighted_score": 0.5, "n": 90},
        ]
    )
    assert report["summary"]["weighting"] == "questions"
    assert report["summary"]["weighted_score"] == pytest.approx((10 * 0.9 + 90 * 0.5) / 100)
    assert report["datasets"][1] == {"name": "notes", "weight": None, "share": 0.9, "weighted_score": 0.5, "n": 90}


def test_aggregate_rejects_mixed_weights_and_bad_values() -> None:
    with pytest.raises(InputError, match="every dataset or to none"):
        aggregate_benchmark(
            [{"name": "a", "weight": 1.0, "weighted_score": 0.5, "n": 3}, {"name": "b", "weighted_score": 0.5, "n": 3}]
        )
    with pytest.raises(InputError) as error:
        aggregate_benchmark([{"name": "a", "weighted_score": float("nan"), "n": -1}])
    assert [(p.line, p.field) for p in error.value.problems] == [(0, "weighted_score"), (0, "n")]
    with pytest.raises(InputError, match="no dataset"):
        aggregate_benchmark([])
