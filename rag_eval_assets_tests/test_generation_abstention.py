"""Abstention inference, seed 002's abstention metrics and attribution hits, on hand-made answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_to_frame
from rag_eval_assets.generation.abstention import infer_abstention
from rag_eval_assets.generation.answers import Answer, answers_frame, error_answer
from rag_eval_assets.metrics.abstention import ABSTENTION_METRICS, abstention_per_query, attribution_hit


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty_answer"),
        ("   \n", "empty_answer"),
        ("I don’t know.", "refusal_phrase"),
        ("Sorry, the context does not contain the boiling point.", "refusal_phrase"),
        ("К сожалению, в документах нет информации об этом.", "refusal_phrase"),
        ("Не могу ответить на этот вопрос.", "refusal_phrase"),
        ("抱歉，上下文中没有相关内容。", "refusal_phrase"),
        ("我不知道。", "refusal_phrase"),
        ("Lubricate the rails every 60 days.", None),
        ("No, the dome stays closed.", None),
        ("Нет, купол остаётся закрытым.", None),
    ],
)
def test_infer_abstention(answer, reason):
    assert infer_abstention(answer) == reason


def _answer(abstained: bool, *, inferred: bool = False, citations=()) -> Answer:
    return Answer("" if abstained else "text", list(citations), abstained, inferred, None, [], 0.1, None, None, 0.0,
                  None, None, None)


QUESTIONS = questions_to_frame(
    [
        Question(id="u1", question="?", format="seed002", answerable=False),
        Question(id="u2", question="?", format="seed002", answerable=False),
        Question(id="u3", question="?", format="seed001", type="negative"),
        Question(id="a1", question="?", format="seed002"),
        Question(id="a2", question="?", format="seed002"),
        Question(id="a3", question="?", format="seed002"),
    ]
)


def _frame(answers: dict[str, Answer]) -> pd.DataFrame:
    return answers_frame(list(answers), list(answers.values()), "bm25", 5, "http")


def rates(answers: pd.DataFrame, questions) -> dict[str, float]:
    """The run's abstention rates as the pipeline aggregates them: each metric's mean over the rows with a value
    (NaN when the run asked no question of that kind)."""
    per_query = abstention_per_query(answers, questions)
    return {m: per_query.loc[per_query["metric"] == m, "value"].dropna().mean() for m in ABSTENTION_METRICS}


def test_abstention_rates_hand_case():
    answers = _frame(
        {
            "u1": _answer(True),  # correct abstention
            "u2": _answer(False),  # hallucinated
            "u3": _answer(True, inferred=True),  # correct, flag inferred
            "a1": _answer(False),  # answered
            "a2": _answer(True),  # abstained on an answerable question
            "a3": error_answer([], "HTTP 500", 0.2),  # no value
        }
    )
    assert rates(answers, QUESTIONS) == {
        "abstention_accuracy": pytest.approx(2 / 3),
        "hallucination_rate_unanswerable": pytest.approx(1 / 3),
        "answered_rate": pytest.approx(1 / 2),
    }
    per_query = abstention_per_query(answers, QUESTIONS)
    a3 = per_query[per_query["query_id"] == "a3"]
    assert a3["metric"].tolist() == ["answered_rate"] and math.isnan(a3["value"].iloc[0])
    u2 = per_query[per_query["query_id"] == "u2"].set_index("metric")["value"].to_dict()
    assert u2 == {"abstention_accuracy": 0.0, "hallucination_rate_unanswerable": 1.0}


def test_rates_without_questions_of_a_kind_are_nan():
    metrics = rates(_frame({"a1": _answer(False)}), QUESTIONS)
    assert math.isnan(metrics["abstention_accuracy"]) and math.isnan(metrics["hallucination_rate_unanswerable"])
    assert metrics["answered_rate"] == 1.0


def test_known_questions_only():
    with pytest.raises(ValueError, match="not in the evalset"):
        abstention_per_query(_frame({"zz": _answer(False)}), QUESTIONS)


CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["g1", "n1", "p3", "p4"],
        "rel_path": ["notes/Dome.md", "notes/Dome.md", "docs/r.pdf", "docs/r.pdf"],
        "heading_path": ["Dome > Shutter", "Dome > Motor", "", ""],
        "page": pd.array([None, None, 3, 4], dtype="Int64"),
    }
)
GOLD = pd.DataFrame(
    {"query_id": ["a1", "a2", "a3"], "chunk_id": ["g1", "p3", "g1"], "doc_id": ["x", "y", "x"],
     "grade": [1, 1, 1], "support_index": [0, 0, 0], "source": ["gold_supports", "source_map", "gold_supports"]}
)


def _cite(chunk_id, rel_path=None, heading_path="", page=None):
    return {"chunk_id": chunk_id, "rel_path": rel_path, "heading_path": heading_path, "page": page, "label": "x"}


def test_attribution_by_our_chunk_ids():
    answers = _frame(
        {
            "u1": _answer(False, citations=[_cite("g1")]),  # no gold: no row
            "a1": _answer(False, citations=[_cite("n1", "notes/Dome.md", "Dome > Motor"), _cite("g1")]),
            "a2": _answer(False, citations=[_cite("p4", "docs/r.pdf", "", 4)]),
            "a3": error_answer([], "timeout", 1.0),
        }
    )
    hits = attribution_hit(answers, GOLD, CHUNKS).set_index("query_id")["value"]
    assert hits.index.tolist() == ["a1", "a2", "a3"]
    assert hits["a1"] == 1.0 and hits["a2"] == 0.0 and math.isnan(hits["a3"])


def test_attribution_by_anchor_for_foreign_chunk_ids():
    answers = _frame(
        {
            # deeper heading under the gold chunk's heading: a hit
            "a1": _answer(False, citations=[_cite("sut-77", "notes/Dome.md", "Dome > Shutter > Rails")]),
            # same file, page 4 while gold is on page 3: a miss
            "a2": _answer(False, citations=[_cite("sut-78", "docs/r.pdf", "", 4)]),
            # our own chunk id in the wrong section never falls back to anchors
            "a3": _answer(False, citations=[_cite("n1", "notes/Dome.md", "Dome > Shutter")]),
        }
    )
    hits = attribution_hit(answers, GOLD, CHUNKS).set_index("query_id")["value"].to_dict()
    assert hits == {"a1": 1.0, "a2": 0.0, "a3": 0.0}


def test_a_citation_naming_no_context_is_never_a_hit():
    answers = _frame({"a1": _answer(False, citations=[_cite(None)])})
    assert attribution_hit(answers, GOLD, CHUNKS)["value"].tolist() == [0.0]
