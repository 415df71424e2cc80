"""The answer metric tables over the retriever x k grid (metrics/answers.py grid_aggregate), the judges' reasons not
to run (generation/judges.py), and the estimates logged before answering and judging (llm/estimate.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.generation.answers import prompt_texts
from rag_eval_assets.generation.judges import JUDGE_DISABLED, JUDGES, judges_not_computed, why_not_judged
from rag_eval_assets.llm import LLMSettings
from rag_eval_assets.llm.estimate import answering_estimate, judging_estimate
from rag_eval_assets.llm.settings import NO_LLM
from rag_eval_assets.metrics.answers import GRID_PER_QUERY_COLUMNS, NO_RULES, grid_aggregate

RULED = [Question(id="q1", question="Revenue 2023?", format="seed000", must_include=("2023",), weight=3.0),
         Question(id="q2", question="Revenue 2024?", format="seed000", must_include=("2024",), weight=1.0)]
PRICED = LLMSettings(base_url="https://api.example/v1", model="m", max_tokens=300, price_per_1k={"m": (1.0, 2.0)})


def _per_query(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(GRID_PER_QUERY_COLUMNS)).astype({"k": "int64", "value": "float64"})


def _note(table: pd.DataFrame, retriever: str, k: int, metric: str) -> pd.Series:
    (row,) = table[(table["retriever"] == retriever) & (table["k"] == k) & (table["metric"] == metric)].itertuples()
    return row


def test_the_weighted_score_and_every_missing_metric_get_a_row_per_cell():
    per_query = _per_query([
        ("q1", "bm25", 5, "question_score", 1.0, None), ("q2", "bm25", 5, "question_score", 0.0, None),
        ("q1", "dense", 5, "question_score", 0.5, None), ("q2", "dense", 5, "question_score", 1.0, None),
        ("q1", "bm25", 5, "correctness", math.nan, "HTTP 503: overloaded"),
        ("q2", "bm25", 5, "correctness", math.nan, "HTTP 503: overloaded"),
        ("q1", "dense", 5, "correctness", 4.0, None), ("q2", "dense", 5, "correctness", math.nan, "timeout"),
    ])
    table = grid_aggregate(per_query, RULED, [("groundedness", JUDGE_DISABLED)])
    assert _note(table, "bm25", 5, "weighted_score").value == pytest.approx(3 / 4)
    assert _note(table, "dense", 5, "weighted_score").value == pytest.approx((0.5 * 3 + 1.0) / 4)
    assert _note(table, "bm25", 5, "weighted_score").n == 2 and pd.isna(_note(table, "bm25", 5, "weighted_score").note)
    for retriever in ("bm25", "dense"):
        grounded = _note(table, retriever, 5, "groundedness")
        assert (grounded.note, grounded.n, math.isnan(grounded.value)) == (JUDGE_DISABLED, 0, True)
    outage = _note(table, "bm25", 5, "correctness")
    assert outage.note == "not computed: 2 of 2 calls failed (HTTP 503: overloaded)" and outage.n == 0
    judged = table[(table["retriever"] == "dense") & (table["metric"] == "correctness") & (table["slice"] == "all")]
    assert list(judged["value"]) == [4.0] and judged["note"].isna().all()


def test_without_rules_the_weighted_score_is_not_applicable():
    unruled = [Question(id="q1", question="Who?", format="seed002")]
    table = grid_aggregate(_per_query([("q1", "bm25", 3, "answered_rate", 1.0, None)]), unruled, [])
    assert _note(table, "bm25", 3, "weighted_score").note == NO_RULES
    assert list(table.loc[table["note"].isna(), "metric"]) == ["answered_rate"]


def test_the_judges_say_why_they_do_not_run():
    assert why_not_judged(True, True) is None and judges_not_computed(True, True) == []
    assert judges_not_computed(False, True) == [(j, NO_LLM) for j in JUDGES]
    assert judges_not_computed(True, False) == [("groundedness", JUDGE_DISABLED), ("correctness", JUDGE_DISABLED)]


def test_estimates_count_the_texts_each_prompt_inserts():
    evalset = pd.DataFrame({"id": ["q1", "q2"], "question": ["x" * 40, "y" * 8]})
    chunks = pd.DataFrame({"chunk_id": ["c1", "c2"], "rel_path": ["a.md", "b.md"], "heading_path": ["A", "B"],
                           "page": pd.array([None, 3], dtype="Int64"), "text": ["t" * 400, "u" * 80]})
    results = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["c1", "c2", "c2"], "rank": [1, 2, 1]})
    prompts = prompt_texts(evalset, results, chunks, 1)
    assert prompts == [["x" * 40, "t" * 400], ["y" * 8, "u" * 80]]
    # q1: 10 + 100 + 200 tokens, q2: 2 + 20 + 200; at most max_tokens back
    assert answering_estimate(prompts, PRICED) == {"calls": 2, "prompt_tokens": 532, "completion_tokens": 600,
                                                   "cost_usd": pytest.approx(0.532 + 1.2)}
    # Two judges per answer, each reading answer and contexts (JSON) together: 50 and 26 tokens, plus 200.
    assert judging_estimate(["a" * 100, "b" * 3], ["c" * 100, "d" * 100], 2, PRICED) == {
        "calls": 4, "prompt_tokens": 952, "completion_tokens": 800, "cost_usd": pytest.approx(0.952 + 1.6)}
