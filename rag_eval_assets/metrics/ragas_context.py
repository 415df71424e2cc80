"""Seed 001's optional RAGAS context_precision / context_recall, through ragas 0.4.3.

Without an LLM the non-LLM variants run (`NonLLMContextPrecisionWithReference`, `NonLLMContextRecall`): each
retrieved context is compared with each reference context by rapidfuzz's normalised Levenshtein similarity, a pair
counting as a match at >= 0.5 for precision and > 0.5 for recall (ragas' thresholds). The reference contexts are the
texts of the question's chunk-level gold chunks. With an LLM the collection variants `ContextPrecisionWithReference`
and `ContextRecall` ask through the project's LLMClient (ragas_llm.py: its cache, retries and usage counts); their
`reference` is the question's reference answer, or else the reference contexts joined.

Nothing is dropped: every (question, metric) gets a row, and whatever ragas raises or returns as NaN becomes a row
with value NaN and the reason in `error` (for a failed LLM call, the client's error text).
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.llm.client import LLMClient
from rag_eval_assets.metrics.ranked_lists import CHUNK_PRECISE_SOURCES

RAGAS_METRICS = ("context_precision", "context_recall")
RAGAS_COLUMNS = ("query_id", "metric", "value", "variant", "error")
_NO_GOLD = "no reference contexts: the question has no chunk-level gold"


@dataclass(frozen=True)
class ContextRow:
    query_id: str
    question: str
    retrieved_contexts: list[str]  # rank order
    reference_contexts: list[str]
    reference: str | None = None  # the reference answer, for the LLM variants


def context_rows(
    questions: Sequence[Question], results: pd.DataFrame, chunks: pd.DataFrame, gold: pd.DataFrame, k: int
) -> list[ContextRow]:
    """One row per question: the texts of one retriever's top-k chunks (rank order, each chunk once, as the
    retrieval metrics count them) and of the question's chunk-level gold chunks (gold rows from gold_supports,
    gold_chunk_ids or source_map; document-level gold lists whole documents and is no reference context)."""
    if results["retriever"].nunique() > 1:
        raise ValueError("context_rows takes the results of one retriever")
    text = dict(zip(chunks["chunk_id"], chunks["text"]))
    ranked = results.sort_values(["query_id", "rank"], kind="stable").drop_duplicates(["query_id", "chunk_id"])
    top = ranked.groupby("query_id", sort=False)["chunk_id"].apply(lambda ids: list(ids)[:k]).to_dict()
    precise = gold[gold["source"].isin(CHUNK_PRECISE_SOURCES)].drop_duplicates(["query_id", "chunk_id"])
    references = precise.groupby("query_id", sort=False)["chunk_id"].apply(list).to_dict()
    unknown = sorted({c for ids in (*top.values(), *references.values()) for c in ids} - set(text))
    if unknown:
        raise InputError(
            [InputProblem("chunks", None, "chunk_id", f"{c!r} is not a chunk of the corpus") for c in unknown]
        )
    return [
        ContextRow(
            query_id=q.id,
            question=q.question,
            retrieved_contexts=[text[c] for c in top.get(q.id, [])],
            reference_contexts=[text[c] for c in references.get(q.id, [])],
            reference=q.reference_answer,
        )
        for q in questions
    ]


def ragas_context_metrics(rows: Sequence[ContextRow], llm: LLMClient | None = None) -> pd.DataFrame:
    """Long table (query_id, metric, value, variant, error): context_precision and context_recall per row;
    `variant` is "non_llm" or "llm" (when `llm` is given).

    Runs its own event loop, so it must not be called from inside a running one."""
    _ragas_offline()
    scored = asyncio.run(_score_all(rows, llm))
    variant = "non_llm" if llm is None else "llm"
    records = [
        (row.query_id, metric, value, variant, error)
        for row, pair in zip(rows, scored)
        for metric, (value, error) in zip(RAGAS_METRICS, pair)
    ]
    return pd.DataFrame(records, columns=list(RAGAS_COLUMNS)).astype({"value": float})


def ragas_grid(
    questions: Sequence[Question],
    answers: Mapping[str, pd.DataFrame],
    retrieval_results: Mapping[str, pd.DataFrame],
    chunks_of: Callable[[str], pd.DataFrame],
    gold_of: Callable[[str], pd.DataFrame],
    llm: LLMClient | None,
    own_answers: Collection[str] = (),
) -> pd.DataFrame:
    """ragas_context_metrics per question, retriever and k of the answers partitions (by partition key), with
    retriever and k columns, against the chunks and gold labels of the chunking each retriever searched
    (`chunks_of(retriever)`, `gold_of(retriever)`). A service under test (`own_answers`) returns its own chunks,
    not ours: ragas gets no chunk texts to compare there, and it has no row."""
    tables = []
    for key in sorted(answers):
        retriever, k = str(answers[key]["retriever"].iloc[0]), int(answers[key]["k"].iloc[0])
        if retriever not in own_answers:
            rows = context_rows(questions, retrieval_results[retriever], chunks_of(retriever), gold_of(retriever), k)
            tables.append(ragas_context_metrics(rows, llm).assign(retriever=retriever, k=k))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(
        columns=[*RAGAS_COLUMNS, "retriever", "k"])


def _ragas_offline() -> None:
    # ragas posts usage events to its vendor unless this is "true", and caches the answer on first use: set it
    # before any ragas call. Nothing else in the paths used here reaches the network (tiktoken is imported but no
    # encoding is loaded).
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"


async def _score_all(rows: Sequence[ContextRow], llm: LLMClient | None) -> list[list[tuple[float, str | None]]]:
    if llm is None:
        from ragas.metrics._context_precision import NonLLMContextPrecisionWithReference
        from ragas.metrics._context_recall import NonLLMContextRecall

        metrics = (NonLLMContextPrecisionWithReference(), NonLLMContextRecall())
        return [
            [await _guarded(lambda m=m, r=row: _non_llm(m, r), _missing(row, row.reference_contexts)) for m in metrics]
            for row in rows
        ]

    from ragas.metrics.collections import ContextPrecisionWithReference, ContextRecall

    from rag_eval_assets.metrics.ragas_llm import ClientRagasLLM

    ragas_llm = ClientRagasLLM(llm)
    metrics = (ContextPrecisionWithReference(llm=ragas_llm), ContextRecall(llm=ragas_llm))
    limit = asyncio.Semaphore(llm.settings.max_concurrency)

    async def score_row(row: ContextRow) -> list[tuple[float, str | None]]:
        reference = row.reference or "\n\n".join(row.reference_contexts)
        inputs = {"user_input": row.question, "retrieved_contexts": row.retrieved_contexts, "reference": reference}
        missing = _missing(row, reference, _NO_GOLD + " and no reference answer")
        out = []
        for metric in metrics:
            async with limit:
                out.append(await _guarded(lambda m=metric: m.ascore(**inputs), missing))
        return out

    return list(await asyncio.gather(*(score_row(row) for row in rows)))


_NO_RETRIEVED = "no retrieved contexts"


def was_computed(error: str | None) -> bool:
    """False for a row ragas was never asked about (a missing input): not a failed computation or call."""
    return not (isinstance(error, str) and error.startswith((_NO_RETRIEVED, _NO_GOLD)))


def _missing(row: ContextRow, reference: object, no_reference: str = _NO_GOLD) -> str | None:
    """Why the metric is undefined for this row before ragas is asked, or None."""
    if not row.retrieved_contexts:
        return _NO_RETRIEVED
    return None if reference else no_reference


def _non_llm(metric: Any, row: ContextRow) -> Awaitable[float]:
    from ragas.dataset_schema import SingleTurnSample

    sample = SingleTurnSample(retrieved_contexts=row.retrieved_contexts, reference_contexts=row.reference_contexts)
    return metric.single_turn_ascore(sample)


async def _guarded(call: Callable[[], Awaitable[Any]], missing: str | None) -> tuple[float, str | None]:
    """(value, None) or (NaN, why): the missing input, or whatever ragas raised, or that it returned NaN."""
    if missing is not None:
        return math.nan, missing
    try:
        result = await call()
    except Exception as exc:  # noqa: BLE001 - every ragas failure becomes an error row, none stops the run
        return math.nan, f"{type(exc).__name__}: {exc}"
    # Collection metrics return a MetricResult, the older single-turn metrics a bare float.
    value = float(getattr(result, "value", result))
    return (math.nan, "ragas returned NaN") if math.isnan(value) else (value, None)
