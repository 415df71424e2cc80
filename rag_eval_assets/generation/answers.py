"""The answers table: one row per (question, retriever, k) answer, whichever answerer produced it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_from_frame
from rag_eval_assets.generation.citations import Context, citations_json, contexts_by_query, contexts_json

ANSWER_COLUMNS = (
    "query_id",
    "retriever",
    "k",
    "answerer",
    "answer",
    "citations",
    "abstained",
    "abstained_inferred",
    "abstain_reason",
    "contexts",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "model",
    "prompt_sha256",
    "error",
)
_DTYPES = {
    "query_id": "str",
    "retriever": "str",
    "k": "int64",
    "answerer": "str",
    "answer": "str",
    "citations": "str",
    "abstained": "bool",
    "abstained_inferred": "bool",
    "abstain_reason": "str",
    "contexts": "str",
    "latency_s": "float64",
    "prompt_tokens": "Int64",
    "completion_tokens": "Int64",
    "cost_usd": "float64",
    "model": "str",
    "prompt_sha256": "str",
    "error": "str",
}


@dataclass(frozen=True)
class Answer:
    """One answer. An answer with `error` set is a failed call: answer "", no citations, not abstained."""

    answer: str
    citations: list[dict[str, Any]]  # {"chunk_id", "rel_path", "heading_path", "page", "label"}
    abstained: bool
    abstained_inferred: bool  # True when `abstained` was inferred from the text, not reported
    abstain_reason: str | None
    contexts: list[Context]  # what the answerer was given (or, over HTTP, what the system retrieved), in rank order
    latency_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float  # NaN when unknown
    model: str | None
    prompt_sha256: str | None
    error: str | None

    @classmethod
    def local(
        cls,
        contexts: list[Context],
        answer: str,
        citations: list[dict[str, Any]],
        abstained: bool,
        abstain_reason: str | None,
        latency_s: float,
    ) -> Answer:
        """An answer computed in process with no model: no tokens, no cost."""
        return cls(answer, citations, abstained, False, abstain_reason, contexts, latency_s, None, None, 0.0, None,
                   None, None)


class Answerer(Protocol):
    kind: str  # "llm" | "extractive" | "http"
    needs_contexts: bool  # False for a system that retrieves for itself

    @property
    def version(self) -> dict[str, Any]: ...

    def answer_many(self, questions: list[Question], contexts: list[list[Context]], k: int) -> list[Answer]: ...


def answer_questions(
    answerer: Answerer,
    questions: pd.DataFrame,
    retrieval_results: pd.DataFrame,
    chunks: pd.DataFrame,
    k: int,
    retriever: str | None = None,
) -> pd.DataFrame:
    """The answers table (ANSWER_COLUMNS) for every question of the evalset table `questions`.

    `retrieval_results` holds one retriever's results; each question gets its top-k chunks, in rank order, as
    contexts (none when nothing was retrieved for it). An answerer that retrieves for itself (HTTP) gets no
    contexts; the retriever name comes from `retrieval_results`, or from `retriever` (a service whose every call
    failed retrieved nothing).
    """
    retrievers = pd.unique(retrieval_results["retriever"]) if retriever is None or len(retrieval_results) else [
        retriever]
    if len(retrievers) != 1 or retriever not in (None, retrievers[0]):
        raise ValueError(f"retrieval_results must hold exactly one retriever, got {list(retrievers)}")
    qs = questions_from_frame(questions)
    if answerer.needs_contexts:
        by_query = contexts_by_query(retrieval_results, chunks, k)
        contexts = [by_query.get(q.id, []) for q in qs]
    else:
        contexts = [[] for _ in qs]
    answers = answerer.answer_many(qs, contexts, k)
    return answers_frame([q.id for q in qs], answers, str(retrievers[0]), k, answerer.kind)


def answers_frame(query_ids: list[str], answers: list[Answer], retriever: str, k: int, kind: str) -> pd.DataFrame:
    rows = [
        (qid, retriever, k, kind, a.answer, citations_json(a.citations), a.abstained, a.abstained_inferred,
         a.abstain_reason, contexts_json(a.contexts), a.latency_s, a.prompt_tokens, a.completion_tokens,
         a.cost_usd, a.model, a.prompt_sha256, a.error)
        for qid, a in zip(query_ids, answers, strict=True)
    ]
    return pd.DataFrame(rows, columns=list(ANSWER_COLUMNS)).astype(_DTYPES)


def error_answer(
    contexts: list[Context],
    error: str,
    latency_s: float,
    *,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    cost_usd: float = math.nan,
    model: str | None = None,
    prompt_sha256: str | None = None,
) -> Answer:
    """A failed call kept as a row: the error text and whatever the call spent; no answer, not abstained."""
    return Answer("", [], False, False, None, contexts, latency_s, prompt_tokens, completion_tokens, cost_usd, model,
                  prompt_sha256, error)


def prompt_texts(evalset: pd.DataFrame, retrieval_results: pd.DataFrame, chunks: pd.DataFrame,
                 k: int) -> list[list[str]]:
    """What an LLM answerer's prompt inserts per question, in evalset order: the question, then its top-k chunk
    texts (for llm/estimate.py answering_estimate)."""
    contexts = contexts_by_query(retrieval_results, chunks, k)
    return [[q, *(c.text for c in contexts.get(i, []))] for i, q in zip(evalset["id"], evalset["question"])]
