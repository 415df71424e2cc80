"""The LLM answerer against a scripted chat server and the HTTP answerer against a loopback RAG service."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_to_frame
from rag_eval_assets.generation.answerers import HttpAnswerer, LLMAnswerer
from rag_eval_assets.generation.answers import answer_questions
from rag_eval_assets.generation.citations import Context
from rag_eval_assets.generation.prompts import ANSWER_PROMPT, ANSWER_SCHEMA
from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm import LLMClient, LLMSettings
from rag_eval_assets.metrics.abstention import abstention_per_query, attribution_hit
from rag_eval_assets.retrieval.kinds import KINDS
from rag_eval_assets.retrieval.kinds.http import HttpSettings
from rag_eval_assets.retrieval.registry import Variant
from rag_eval_assets.retrieval.sut_responses import read_responses, responses_frame
from rag_eval_assets_tests.llm_fault_server import Reply, Status, llm_fault_server
from rag_eval_assets_tests.sut_server import CorpusChunk, chunk_id_of, sut_server

PDF = Context("p3", "docs/r.pdf", "", 3, "Clear nights in 2025: 214.")
NOTE = Context("n1", "notes/Dome.md", "Dome > Shutter", None, "Lubricate the rails every 60 days.")


def _llm(base_url: str) -> LLMClient:
    return LLMClient(LLMSettings(base_url=base_url, model="scripted", max_concurrency=1,
                                 retry=RetryPolicy(max_attempts=1)))


def _reply(data: dict[str, Any]) -> Reply:
    return Reply(json.dumps(data, ensure_ascii=False), prompt_tokens=120, completion_tokens=30)


def test_llm_answer_maps_context_numbers_to_labelled_citations():
    reply = {"answer": "214 nights (стр. 3).", "citations": [1, 1, 7], "abstained": False, "abstain_reason": "x"}
    with llm_fault_server([_reply(reply)]) as server, _llm(server.base_url) as client:
        [answer] = LLMAnswerer(client).answer_many(
            [Question(id="q", question="How many clear nights?", format="seed000")], [[PDF, NOTE]], k=2)
    body = server.bodies[0]
    assert body["response_format"] == {"type": "json_object", "schema": ANSWER_SCHEMA}
    assert body["messages"][1]["content"].startswith(
        "Context:\n[1] (стр. 3)\nClear nights in 2025: 214.\n\n[2] (notes/Dome.md > Dome > Shutter)\n"
        "Lubricate the rails every 60 days.\n\nQuestion: How many clear nights?")
    assert answer.answer == "214 nights (стр. 3)."
    assert answer.citations == [
        {"chunk_id": "p3", "rel_path": "docs/r.pdf", "heading_path": "", "page": 3, "label": "стр. 3"},
        {"chunk_id": None, "rel_path": None, "heading_path": None, "page": None, "label": "[7] names no context"},
    ]
    assert (answer.abstained, answer.abstained_inferred, answer.abstain_reason, answer.error) == (
        False, False, None, None)
    assert (answer.prompt_tokens, answer.completion_tokens, answer.model) == (120, 30, "scripted")
    assert answer.prompt_sha256 == ANSWER_PROMPT.sha256 and answer.latency_s > 0


def test_llm_abstention_is_reported_not_inferred():
    reply = {"answer": "", "citations": [], "abstained": True, "abstain_reason": "not in the passages"}
    with llm_fault_server([_reply(reply)]) as server, _llm(server.base_url) as client:
        [answer] = LLMAnswerer(client).answer_many([Question(id="q", question="Boiling point?", format="seed002")],
                                                   [[NOTE]], k=1)
    assert (answer.abstained, answer.abstained_inferred, answer.abstain_reason) == (True, False, "not in the passages")


def test_llm_failures_become_error_rows_in_the_answers_table():
    chunks = pd.DataFrame({"chunk_id": ["n1"], "doc_id": ["d"], "corpus_id": ["t"], "rel_path": ["notes/Dome.md"],
                           "heading_path": ["Dome > Shutter"], "page": pd.array([None], dtype="Int64"),
                           "chunk_index": [0], "text": [NOTE.text], "char_start": [0], "char_end": [10],
                           "n_tokens": [5]})
    results = pd.DataFrame({"query_id": ["a", "b"], "retriever": ["bm25"] * 2, "rank": [1, 1],
                            "chunk_id": ["n1", "n1"], "doc_id": ["d", "d"], "score": [1.0, 1.0]})
    questions = questions_to_frame([Question(id="a", question="Rails?", format="seed002"),
                                    Question(id="b", question="Rails again?", format="seed002")])
    # Request 1 (question a) gets a 500; question b gets prose twice (the reply and the repair).
    script = [Status(500), Reply("The rails need grease."), Reply("Still prose.")]
    with llm_fault_server(script) as server, _llm(server.base_url) as client:
        answers = answer_questions(LLMAnswerer(client), questions, results, chunks, k=3)
        usage = client.usage()
    assert answers["query_id"].tolist() == ["a", "b"]
    assert answers["answer"].tolist() == ["", ""]
    assert "500" in answers["error"][0]
    assert "does not match the schema after one repair request" in answers["error"][1]
    assert answers["prompt_tokens"].tolist() == [0, 22]  # the 500 spent nothing; b spent two requests of 11
    assert not answers["abstained"].any()
    assert usage["errors"] == 2 and usage["requests"] == 3
    per_query = abstention_per_query(answers, questions)
    assert per_query["value"].isna().all()  # both calls failed: no abstention value to count


GO = CorpusChunk("Software/Tips.md", "Golang Tips", "Go has no built in string sort. A string element is a byte.")
RUN = CorpusChunk("Health/Running.md", "Training > Long runs", "Long runs build aerobic base. Keep the pace easy.")


def _sut(url: str) -> HttpAnswerer:
    """The service's answers as the pipeline reads them: one call per question, stored, then read back."""
    variant = Variant("http", "http", HttpSettings(base_url=url, max_attempts=1))
    frame = HTTP_QUESTIONS
    outcomes = KINDS["http"].respond(variant, frame["question"].tolist(), 2, None)
    table = responses_frame(frame["id"].tolist(), "http", outcomes)
    return HttpAnswerer(read_responses(table, url), url)


HTTP_QUESTIONS = questions_to_frame(
    [
        Question(id="go", question="Does Go have a built in string sort?", format="seed002", answerable=True),
        Question(id="moon", question="Quantum chromodynamics lattice?", format="seed002", answerable=False),
    ]
)
HTTP_RESULTS = pd.DataFrame({"query_id": ["go"], "retriever": ["http"], "rank": [1], "chunk_id": ["x"],
                             "doc_id": ["Software/Tips.md"], "score": [1.0]})


def test_http_answer_references_and_reported_abstention():
    with sut_server([GO, RUN]) as server:
        answers = answer_questions(_sut(server.url), HTTP_QUESTIONS, HTTP_RESULTS, pd.DataFrame(), k=2)
    go, moon = answers.itertuples(index=False)
    assert (go.answerer, go.retriever, go.k) == ("http", "http", 2)
    assert go.answer == "Go has no built in string sort."
    assert json.loads(go.citations) == [
        {"chunk_id": chunk_id_of("test-vault", GO), "rel_path": "Software/Tips.md", "heading_path": "Golang Tips",
         "page": None, "label": "Software/Tips.md > Golang Tips"}
    ]
    assert [c["chunk_id"] for c in json.loads(go.contexts)] == [chunk_id_of("test-vault", c) for c in (GO, RUN)]
    assert (go.abstained, go.abstained_inferred) == (False, False)
    assert (moon.abstained, moon.abstained_inferred, moon.abstain_reason) == (True, False, "no_relevant_context")
    assert math.isnan(go.cost_usd) and pd.isna(go.prompt_tokens)

    # Attribution by anchor: the service's chunk ids are its own, our gold chunk has the same rel_path/heading.
    ours = pd.DataFrame({"chunk_id": ["our-go"], "rel_path": ["Software/Tips.md"], "heading_path": ["Golang Tips"],
                         "page": pd.array([None], dtype="Int64")})
    gold = pd.DataFrame({"query_id": ["go"], "chunk_id": ["our-go"]})
    assert attribution_hit(answers, gold, ours)["value"].tolist() == [1.0]


def test_http_abstention_is_inferred_when_the_service_does_not_say():
    with sut_server([GO, RUN], abstention_fields=False) as server:
        answers = answer_questions(_sut(server.url), HTTP_QUESTIONS, HTTP_RESULTS, pd.DataFrame(), k=2)
    assert answers["abstained"].tolist() == [False, True]
    assert answers["abstained_inferred"].tolist() == [True, True]
    assert answers["abstain_reason"].tolist()[1] == "empty_answer"


def test_http_failures_become_error_rows():
    with sut_server([GO, RUN], faults=[503, "wrong_shape"]) as server:
        answers = answer_questions(_sut(server.url), HTTP_QUESTIONS, HTTP_RESULTS, pd.DataFrame(), k=2)
    assert answers["answer"].tolist() == ["", ""]
    assert "status 503" in answers["error"][0]
    assert "retrieved_chunks[1].chunk_id" in answers["error"][1]
