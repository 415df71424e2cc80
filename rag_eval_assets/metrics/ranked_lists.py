"""What the retrieval metrics (metrics/retrieval.py) and the TREC export (metrics/trec.py) are computed over: one
ranked list per (retriever, question), each id at its first (best) occurrence only, and the relevance judgements
(qrels) at chunk or document level from the gold rows and their sources.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LEVELS = ("chunk", "doc")
CHUNK_PRECISE_SOURCES = ("gold_supports", "gold_chunk_ids", "source_map")
DOC_SOURCES = ("gold_doc_ids", "qrels")
GOLD_SOURCES = CHUNK_PRECISE_SOURCES + DOC_SOURCES


def ranked_lists(results: pd.DataFrame, level: str) -> pd.DataFrame:
    """One ranked list per (retriever, query_id): columns retriever, query_id, item (chunk_id or doc_id at `level`),
    doc_id, position (1-based), rows in rank order with each item at its first occurrence only; lists ordered by
    retriever, then query_id."""
    item = "chunk_id" if level == "chunk" else "doc_id"
    retriever = pd.factorize(results["retriever"], sort=True)[0].astype(np.int64)
    query = pd.factorize(results["query_id"], sort=True)[0].astype(np.int64)
    order = np.lexsort((results["rank"].to_numpy(), query, retriever))
    group = (retriever * (query.max(initial=-1) + 1) + query)[order]
    items = pd.factorize(results[item])[0].astype(np.int64)[order]
    first = ~pd.Index(group * (items.max(initial=-1) + 1) + items).duplicated(keep="first")
    rows, group = order[first], group[first]
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    position = np.arange(len(rows)) - np.repeat(starts, np.diff(np.append(starts, len(rows)))) + 1
    return pd.DataFrame(
        {
            "retriever": results["retriever"].array.take(rows),
            "query_id": results["query_id"].array.take(rows),
            "item": results[item].array.take(rows),
            "doc_id": results["doc_id"].array.take(rows),
            "position": position,
        }
    )


def relevance_judgements(gold: pd.DataFrame, level: str) -> pd.DataFrame:
    """The qrels at `level`: columns query_id, item, grade (the highest grade any gold row gives the item).

    Chunk level trusts only chunk-precise sources; doc-level sources list every chunk of a relevant document, which
    says nothing about which chunk holds the answer.
    """
    item = "chunk_id" if level == "chunk" else "doc_id"
    rows = gold[gold["source"].isin(CHUNK_PRECISE_SOURCES)] if level == "chunk" else gold
    judged = rows.groupby(["query_id", item], sort=True, as_index=False)["grade"].max()
    return judged.rename(columns={item: "item"})
