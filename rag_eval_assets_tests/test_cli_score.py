"""`rag-eval score`: answers produced elsewhere, scored by seed 000's formula from the command line."""

import json
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.cli import main

QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "sample" / "evalsets" / "questions.jsonl"


def test_weighted_score_written_for_answers_from_another_system(tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    rows = [
        # q001: must_include 214 present, 195 absent, citation present -> 0.7*1 + 0.3*1 = 1.0
        {"id": "q001", "answer": "В 2025 году было 214 ясных ночей (стр. 2)."},
        # q002 (weight 2): the OR-group matches, no citation -> 1.0 - 0.2 = 0.8
        {"id": "q002", "answer": "Бюджет составил 61,4 млн евро."},
        # q003: "38" present, OR-group ("грант") present, no citation required -> 1.0
        {"id": "q003", "answer": "Гранты дали 38% бюджета."},
    ]
    answers.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main(["score", "--evalset", str(QUESTIONS), "--answers", str(answers), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["weighted_score"] == pytest.approx((1.0 * 1 + 0.8 * 2 + 1.0 * 1) / 4)
    assert summary["n"] == 3 and len(summary["questions_sha256"]) == 64
    per_question = pd.read_parquet(tmp_path / "out" / "per_question.parquet")
    scores = per_question[per_question["metric"] == "question_score"].set_index("query_id")["value"]
    assert scores.to_dict() == pytest.approx({"q001": 1.0, "q002": 0.8, "q003": 1.0})
    assert "weighted_score: 0.9000" in capsys.readouterr().out


def test_answers_file_errors_name_line_and_field(tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "q001", "answer": "x"}\n{"id": "nope", "answer": "y"}\n{"answer": "z"}\n',
                       encoding="utf-8")
    assert main(["score", "--evalset", str(QUESTIONS), "--answers", str(answers), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{answers}:2: field 'id'" in err and f"{answers}:3: field 'id'" in err
    assert not (tmp_path / "o").exists()
