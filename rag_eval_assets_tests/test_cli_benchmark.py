"""`rag-eval benchmark` (seed 000, section 6): two datasets through the pipeline and one weighted score over them."""

import json
from pathlib import Path

import pytest

from rag_eval_assets.cli import main
from rag_eval_assets_tests.stored_tables import stored_table

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def _bench(tmp_path: Path, notes_evalset: Path) -> Path:
    config = tmp_path / "bench.yaml"
    config.write_text(
        "name: sample-benchmark\n"
        "datasets:\n"
        f"  - {{name: report, corpus: {SAMPLE / 'corpus'}, evalset: {SAMPLE / 'evalsets' / 'questions.jsonl'}, weight: 3}}\n"
        f"  - {{name: notes, corpus: {SAMPLE / 'corpus'}, evalset: {notes_evalset}, weight: 1}}\n",
        encoding="utf-8",
    )
    return config


def test_a_dataset_without_seed_000_rules_is_refused_before_anything_runs(tmp_path, capsys):
    config = _bench(tmp_path, SAMPLE / "evalsets" / "eval_set.jsonl")
    out = tmp_path / "out"
    assert main(["benchmark", "--config-file", str(config), "--out", str(out), "--retrievers", "bm25", "--k", "5"]) == 2
    err = capsys.readouterr().err
    assert f"{config}:1: field 'evalset':" in err and "has no question with a seed 000 rule" in err
    assert not out.exists()


def test_two_datasets_aggregate_by_weight(tmp_path):
    # The second dataset: five questions of the seed 000 sample (weights 1, 2, 1, 1, 1; each scores 1.0 from bm25's
    # top 5, as the whole sample does) and one whose required fact is in no document: include_rate 0, safe_ok 1,
    # score 0.7 * 0 + 0.3 * 1 = 0.3. By hand: (6 * 1.0 + 1 * 0.3) / 7 = 0.9.
    subset = tmp_path / "five_and_one.jsonl"
    lines = (SAMPLE / "evalsets" / "questions.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    absent = {"id": "q_absent", "question": "Какой бюджет у обсерватории на Луне?", "must_include": ["9999 лунных рублей"]}
    subset.write_text("".join(lines[:5]) + json.dumps(absent, ensure_ascii=False) + "\n", encoding="utf-8")
    config = _bench(tmp_path, subset)
    out = tmp_path / "out"
    assert main(["benchmark", "--config-file", str(config), "--out", str(out), "--retrievers", "bm25", "--k", "5"]) == 0
    report = json.loads((out / "benchmark.json").read_text(encoding="utf-8"))
    (cell,) = report["cells"]
    assert (cell["retriever"], cell["k"]) == ("bm25", 5)
    scores = {}
    for name in ("report", "notes"):
        table = stored_table(out / name / "store" / "assets", "answer_metrics")
        row = table[(table.metric == "weighted_score") & (table.slice == "all")]
        scores[name] = row["value"].item()
    assert {d["name"]: d["weighted_score"] for d in cell["datasets"]} == pytest.approx(scores)
    assert cell["summary"]["weighted_score"] == pytest.approx((3 * scores["report"] + scores["notes"]) / 4)
    assert cell["summary"]["weighting"] == "weight"
    assert (scores["report"], scores["notes"]) == pytest.approx((1.0, 0.9))
    assert cell["summary"]["weighted_score"] == pytest.approx((3 * 1.0 + 0.9) / 4)
