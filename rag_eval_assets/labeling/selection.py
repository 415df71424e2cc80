"""Which questions a session shows (--only unlabeled | failing | all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.labeling.labels import is_labeled
from rag_eval_assets.runs.store import read_run

def select(questions: list[Question], only: str, failing: set[str] | None = None) -> list[Question]:
    if only == "unlabeled":
        return [q for q in questions if not is_labeled(q)]
    if only == "failing":
        return [q for q in questions if failing is not None and q.id in failing]
    return list(questions)


def failing_ids(run_dir: Path, retriever: str, k: int, questions: list[Question],
                chunks: pd.DataFrame | None) -> set[str]:
    """The questions of `run_dir` none of whose gold chunks is in `retriever`'s top k there.

    Gold is resolved against `chunks` (the corpus as now chunked) or, for a service under test whose chunks are
    its own, against the chunks the run recorded it returning. A question without gold, or absent from the run,
    is not failing: there is nothing it could have missed.
    """
    rows = [row for row in read_run(run_dir).results if row["retriever"] == retriever]
    if not rows:
        raise ValueError(f"run {run_dir} has no results for retriever {retriever!r}")
    deepest: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["query_id"] not in deepest or row["k"] > deepest[row["query_id"]]["k"]:
            deepest[row["query_id"]] = row
    top = {qid: [c["chunk_id"] for c in row["retrieved"][:k]] for qid, row in deepest.items()}
    if chunks is None:
        chunks = _recorded_chunks([row for row in deepest.values()])
    gold = resolve_gold([q for q in questions if q.id in top], chunks, strict=False)
    gold_by_query = gold.groupby("query_id")["chunk_id"].apply(set).to_dict()
    return {qid for qid, gold_chunks in gold_by_query.items() if not gold_chunks & set(top[qid])}


def _recorded_chunks(rows: list[dict[str, Any]]) -> pd.DataFrame:
    seen = {c["chunk_id"]: c for row in rows for c in row["retrieved"]}
    return pd.DataFrame(
        {
            "chunk_id": list(seen),
            "doc_id": [c["doc_id"] for c in seen.values()],
            "rel_path": [c["rel_path"] for c in seen.values()],
            "heading_path": [c["heading_path"] for c in seen.values()],
            "page": pd.array([c.get("page") for c in seen.values()], dtype="Int64"),
            "text": [c["text"] for c in seen.values()],
        }
    )
