"""Questions survive the trip through a Parquet table unchanged, for every shipped format."""

from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.tables import questions_from_frame, questions_to_frame

EVALSETS = Path(__file__).resolve().parents[1] / "data" / "sample" / "evalsets"


@pytest.mark.parametrize(
    "name",
    ["questions.jsonl", "evalset.jsonl", "eval_set.jsonl", "question_v2.json", "generated_queries.jsonl", "beir"],
)
def test_parquet_round_trip_is_exact(tmp_path, name):
    questions = load_evalset(EVALSETS / name)
    questions_to_frame(questions).to_parquet(tmp_path / "q.parquet", index=False)
    back = questions_from_frame(pd.read_parquet(tmp_path / "q.parquet"))
    assert back == questions
