"""The groundedness and correctness judges against a scripted chat server: stored inputs, skipped answers,
judge errors, replicates and agreement."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_to_frame
from rag_eval_assets.generation.answers import Answer, answers_frame, error_answer
from rag_eval_assets.generation.citations import Context
from rag_eval_assets.generation.judges import (
    JUDGMENT_COLUMNS,
    judge_agreement,
    judge_answers,
    judgment_counts,
)
from rag_eval_assets.generation.prompts import CORRECTNESS_SCHEMA, GROUNDEDNESS_SCHEMA
from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm import LLMCache, LLMClient, LLMSettings
from rag_eval_assets_tests.llm_fault_server import Reply, llm_fault_server

CTX = [Context("n1", "notes/Dome.md", "Dome > Shutter", None, "Lubricate the rails every 60 days.")]
QUESTIONS = questions_to_frame(
    [
        Question(id="q1", question="How often are the rails lubricated?", format="seed004", type="literal",
                 reference_answer="Every 60 days."),
        Question(id="q2", question="Which grease?", format="seed002", expected_key_facts=("KR-7", "lithium")),
        Question(id="q3", question="Boiling point of nitrogen?", format="seed002", answerable=False),
        Question(id="q4", question="Dome colour?", format="seed002"),
        Question(id="q5", question="Motor?", format="seed002"),
    ]
)


def _answer(text: str, abstained: bool = False) -> Answer:
    return Answer(text, [CTX[0].citation()], abstained, False, None, CTX, 0.1, 10, 5, 0.0, "m", "sha", None)


ANSWERS = answers_frame(
    ["q1", "q2", "q3", "q4", "q5"],
    [_answer("Every 60 days (notes/Dome.md > Dome > Shutter)."), _answer("JUDGE-FAIL"), _answer("", True),
     error_answer(CTX, "HTTP 500", 1.0), _answer("It was replaced.")],
    "bm25", 5, "llm",
)


def _responder(body: dict[str, Any]) -> Reply:
    """A stand-in judge: a fixed verdict per answer; the answer JUDGE-FAIL never gets valid JSON."""
    user = body["messages"][1]["content"] if len(body["messages"]) > 1 else ""
    if "JUDGE-FAIL" in json.dumps(body["messages"]):
        return Reply("I refuse to use JSON.")
    score = 5 if "Every 60 days" in user else 1
    if body["response_format"]["schema"] == GROUNDEDNESS_SCHEMA:
        data = {"supported_claims": ["every 60 days"] if score == 5 else [], "unsupported_claims": [], "score": score}
    else:
        data = {"reasoning": "matches the reference" if score == 5 else "off topic", "score": score}
    return Reply(json.dumps(data), prompt_tokens=200, completion_tokens=25)


def _client(base_url: str, cache: LLMCache | None = None) -> LLMClient:
    settings = LLMSettings(base_url=base_url, model="judge-m", retry=RetryPolicy(max_attempts=1))
    return LLMClient(settings, cache)


def test_judgments_store_scores_claims_inputs_and_explicit_non_judgements():
    with llm_fault_server(responder=_responder) as server, _client(server.base_url) as client:
        judgments = judge_answers(client, ANSWERS, QUESTIONS)
    assert tuple(judgments.columns) == JUDGMENT_COLUMNS
    table = judgments.set_index(["query_id", "judge"])
    assert table.loc[("q1", "groundedness"), "score"] == 5.0
    assert json.loads(table.loc[("q1", "groundedness"), "supported_claims"]) == ["every 60 days"]
    assert table.loc[("q1", "correctness"), "reasoning"] == "matches the reference"
    assert table.loc[("q5", "correctness"), "score"] == 1.0
    for judge in ("groundedness", "correctness"):
        assert math.isnan(table.loc[("q2", judge), "score"])
        assert "after one repair request" in table.loc[("q2", judge), "error"]
        assert (table.loc[("q3", judge), "error"], table.loc[("q4", judge), "error"]) == ("abstained", "answer_error")
        assert table.loc[("q3", judge), "judge_input"] == ""  # never sent
    assert judgment_counts(judgments) == {
        "correctness": {"judged": 2, "errors": 1, "abstained": 1, "answer_errors": 1},
        "groundedness": {"judged": 2, "errors": 1, "abstained": 1, "answer_errors": 1},
    }
    # The full input is stored: the correctness judge saw the reference answer and the numbered context.
    messages = json.loads(table.loc[("q1", "correctness"), "judge_input"])
    assert "Reference answer: Every 60 days." in messages[1]["content"]
    assert "[1] (notes/Dome.md > Dome > Shutter)\nLubricate the rails every 60 days." in messages[1]["content"]
    q2_input = json.loads(table.loc[("q2", "correctness"), "judge_input"])[1]["content"]
    assert "Reference answer: KR-7; lithium" in q2_input
    assert set(judgments["judge_model"]) == {"judge-m"} and set(judgments["temperature"]) == {0.0}
    assert set(judgments["judge_prompt_version"]) == {"v1"} and set(judgments["replicate"]) == {0}
    assert table.loc[("q1", "groundedness"), "prompt_tokens"] == 200
    # 3 answers sent x 2 judges, the failing ones twice (reply and repair).
    assert len(server.requests) == 2 * 2 + 2 * 2


def test_replicates_are_real_calls_that_a_deterministic_judge_agrees_with(tmp_path):
    answers = ANSWERS[ANSWERS["query_id"] != "q2"]  # judged: q1 and q5
    with llm_fault_server(responder=_responder) as server:
        with LLMCache(tmp_path / "judge.sqlite") as cache, _client(server.base_url, cache) as client:
            judgments = judge_answers(client, answers, QUESTIONS, replicates=2, replicate_sample=1, seed=7)
            first_run_requests = len(server.requests)
            again = judge_answers(client, answers, QUESTIONS, replicates=2, replicate_sample=1, seed=7)
    reps = judgments[judgments["replicate"] > 0]
    # One seeded answer of the two judged ones, 2 replicates x 2 judges.
    assert len(reps) == 4 and set(reps["replicate"]) == {1, 2} and reps["query_id"].nunique() == 1
    assert set(reps["query_id"]) < {"q1", "q5"}
    # Every replicate reached the server (its cache key differs from the main call's); the re-run hit the cache.
    assert first_run_requests == 2 * 2 + 4 and len(server.requests) == first_run_requests
    assert again.drop(columns="latency_s").equals(judgments.drop(columns="latency_s"))
    assert judge_agreement(judgments) == {
        "correctness": {"pairs": 2, "exact_agreement": 1.0, "mean_abs_diff": 0.0},
        "groundedness": {"pairs": 2, "exact_agreement": 1.0, "mean_abs_diff": 0.0},
    }


def test_agreement_on_disagreeing_scores():
    rows = [("a", 0, 4.0), ("a", 1, 4.0), ("a", 2, 2.0), ("b", 0, 5.0), ("b", 1, 3.0), ("c", 1, 1.0)]
    judgments = pd.DataFrame({"query_id": [r[0] for r in rows], "retriever": "bm25", "k": 5, "judge": "correctness",
                              "replicate": [r[1] for r in rows], "score": [r[2] for r in rows]})
    assert judge_agreement(judgments) == {
        "correctness": {"pairs": 3, "exact_agreement": pytest.approx(1 / 3), "mean_abs_diff": pytest.approx(4 / 3)}
    }


def test_unknown_prompt_version_is_refused():
    with pytest.raises(ValueError, match="unknown judge prompt version"):
        judge_answers(None, ANSWERS, QUESTIONS, judge_prompt_version="v0")  # type: ignore[arg-type]


def test_schemas_are_the_ones_sent():
    with llm_fault_server(responder=_responder) as server, _client(server.base_url) as client:
        judge_answers(client, ANSWERS.iloc[:1], QUESTIONS)
    assert [b["response_format"]["schema"] for b in server.bodies] in (
        [GROUNDEDNESS_SCHEMA, CORRECTNESS_SCHEMA], [CORRECTNESS_SCHEMA, GROUNDEDNESS_SCHEMA])


def test_an_empty_answer_is_never_sent_to_a_judge() -> None:
    empty = answers_frame(["q4"], [_answer("   ")], "bm25", 5, "llm")
    with llm_fault_server(responder=_responder) as server:
        table = judge_answers(_client(server.base_url), empty, QUESTIONS)
        assert server.requests == []
    assert set(table["error"]) == {"abstained"} and table["score"].isna().all()
