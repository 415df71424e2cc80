"""Seed 002's abstention metrics and attribution hits, over answers whose abstention the answerer gave or
generation/abstention.py inferred.

Per-query metrics (long rows: query_id, retriever, k, metric, value), whose means are seed 002's rates:
- unanswerable questions (type "negative" or answerable false): `abstention_accuracy` 1 when the answer abstained,
  `hallucination_rate_unanswerable` 1 when it answered anyway;
- answerable questions: `answered_rate` 1 when the answer did not abstain;
- `attribution_hit` (answerable questions with gold only): 1 when a citation matches a gold chunk.
An answer row with an error has no value (NaN): a failed call says nothing about abstention or attribution.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from rag_eval_assets.corpus.headings import heading_prefix_match
from rag_eval_assets.metrics.retrieval import PER_QUERY_COLUMNS

ABSTENTION_METRICS = ("abstention_accuracy", "hallucination_rate_unanswerable", "answered_rate")


def unanswerable_ids(questions: pd.DataFrame) -> dict[str, bool]:
    """query id -> whether the question is unanswerable (type "negative" or answerable false), from the evalset
    table (questions_to_frame)."""
    return {
        str(qid): qtype == "negative" or not bool(answerable)
        for qid, qtype, answerable in zip(questions["id"], questions["type"], questions["answerable"])
    }


def abstention_per_query(answers: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per-query abstention rows (see module docstring) for every answer row."""
    unanswerable = unanswerable_ids(questions)
    unknown = sorted(set(answers["query_id"]) - set(unanswerable))
    if unknown:
        raise ValueError(f"answers for query ids not in the evalset: {unknown[:5]}")
    rows: list[tuple[str, str, int, str, float]] = []
    for row in answers.itertuples(index=False):
        failed = isinstance(row.error, str)
        abstained = float(bool(row.abstained))
        if unanswerable[row.query_id]:
            values = {"abstention_accuracy": abstained, "hallucination_rate_unanswerable": 1.0 - abstained}
        else:
            values = {"answered_rate": 1.0 - abstained}
        for metric, value in values.items():
            rows.append((row.query_id, row.retriever, int(row.k), metric, math.nan if failed else value))
    return _per_query_frame(rows)


def attribution_hit(answers: pd.DataFrame, gold: pd.DataFrame, chunks: pd.DataFrame) -> pd.DataFrame:
    """Per-query `attribution_hit` rows for answers to questions with gold (answerable ones).

    A citation whose chunk_id is one of ours (in `chunks`) hits when it is a gold chunk of the question. A citation
    with a foreign id (an HTTP system's own chunk ids) hits by anchor: same rel_path as a gold chunk, its
    heading_path having the gold chunk's heading_path as a component-wise prefix, and the same page when the gold
    chunk has one.
    """
    ours = set(chunks["chunk_id"])
    location = {
        c: (r, h, None if pd.isna(p) else int(p))
        for c, r, h, p in zip(chunks["chunk_id"], chunks["rel_path"], chunks["heading_path"], chunks["page"])
    }
    gold_chunks: dict[str, set[str]] = {}
    for qid, chunk_id in zip(gold["query_id"], gold["chunk_id"]):
        gold_chunks.setdefault(qid, set()).add(chunk_id)

    def hit(qid: str, citation: dict[str, Any]) -> bool:
        chunk_id = citation.get("chunk_id")
        if chunk_id in ours:
            return chunk_id in gold_chunks[qid]
        if citation.get("rel_path") is None:
            return False
        return any(
            citation["rel_path"] == location[g][0]
            and heading_prefix_match(citation.get("heading_path") or "", location[g][1])
            and (location[g][2] is None or citation.get("page") == location[g][2])
            for g in gold_chunks[qid]
        )

    rows: list[tuple[str, str, int, str, float]] = []
    for row in answers.itertuples(index=False):
        if row.query_id not in gold_chunks:
            continue
        if isinstance(row.error, str):
            value = math.nan
        else:
            value = float(any(hit(row.query_id, c) for c in json.loads(row.citations)))
        rows.append((row.query_id, row.retriever, int(row.k), "attribution_hit", value))
    return _per_query_frame(rows)


def _per_query_frame(rows: list[tuple[str, str, int, str, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(PER_QUERY_COLUMNS))
    return frame.astype({"query_id": "str", "retriever": "str", "k": "int64", "metric": "str", "value": "float64"})
