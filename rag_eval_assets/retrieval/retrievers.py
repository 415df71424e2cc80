"""The named retrievers of a run (bm25, dense, hybrid, http) and the long results table they all produce.

Every query is searched on its own and timed, so `latency_s` is a real per-query latency, as a user of the system
would see it, not a batch average.

A folder filter (seed 002's folder selection) restricts a query to the chunks under its folders: the full ranking
is computed and cut after filtering, so the top k is exact rather than what survives of an unfiltered top k.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.retrieval.analyzers import Analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.hybrid import Fusion, convex, rrf
from rag_eval_assets.retrieval.ranking import Ranking

RESULT_COLUMNS = (
    "query_id",
    "retriever",
    "rank",
    "chunk_id",
    "doc_id",
    "score",
    "score_bm25",
    "score_dense",
    "latency_s",
)


@dataclass
class Bm25Retriever:
    index: BM25Index
    analyzer: Analyzer

    def version(self) -> dict[str, Any]:
        p = self.index.params
        return {"name": "bm25", "variant": p.variant, "k1": p.k1, "b": p.b, "epsilon": p.epsilon,
                "analyzer": self.analyzer.name}

    def search(self, text: str, depth: int, allowed: frozenset[int] | None = None) -> Ranking:
        if allowed is None:
            return self.index.search([self.analyzer(text)], depth)[0]
        return _within(self.index.search([self.analyzer(text)], self.index.n_docs)[0], allowed, depth)


@dataclass
class DenseRetriever:
    index: DenseIndex

    def version(self) -> dict[str, Any]:
        return {"name": "dense", "embedding_model": self.index.model_id}

    def search(self, text: str, depth: int, allowed: frozenset[int] | None = None) -> Ranking:
        if allowed is None:
            return self.index.search([text], depth)[0]
        return _within(self.index.search([text], len(self.index.vectors))[0], allowed, depth)


@dataclass
class HybridRetriever:
    """Fuses bm25 and dense over `candidate_depth` candidates each, by rank (rrf) or normalised score (convex)."""

    bm25: Bm25Retriever
    dense: DenseRetriever
    method: str = "rrf"
    rrf_k: int = 60
    alpha: float = 0.5
    candidate_depth: int = 100

    def version(self) -> dict[str, Any]:
        fusion = {"method": self.method, "candidate_depth": self.candidate_depth}
        fusion.update({"rrf_k": self.rrf_k} if self.method == "rrf" else {"alpha": self.alpha})
        return {"name": "hybrid", **fusion, "bm25": self.bm25.version(), "dense": self.dense.version()}

    def fuse(self, text: str, depth: int, allowed: frozenset[int] | None = None) -> Fusion:
        candidates = max(depth, self.candidate_depth)
        lexical = [self.bm25.search(text, candidates, allowed)]
        semantic = [self.dense.search(text, candidates, allowed)]
        if self.method == "rrf":
            return rrf([lexical, semantic], k=self.rrf_k, depth=depth)
        return convex(lexical, semantic, alpha=self.alpha, depth=depth)


def _within(ranking: Ranking, allowed: frozenset[int], depth: int) -> Ranking:
    return [hit for hit in ranking if hit[0] in allowed][:depth]


def folder_rows(chunks: pd.DataFrame, folders: Sequence[str]) -> frozenset[int] | None:
    """Row positions of the chunks under any of `folders` (POSIX prefixes of rel_path); None = no filter."""
    prefixes = [f.strip("/") + "/" for f in folders if f.strip("/")]
    if not prefixes:
        return None
    under = chunks["rel_path"].map(lambda path: any(path.startswith(p) for p in prefixes)).to_numpy()
    return frozenset(np.flatnonzero(under).tolist())


def _frame(rows: list[tuple], chunks: pd.DataFrame) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["query_id", "retriever", "rank", "row", "score", "score_bm25", "score_dense",
                                     "latency_s"])
    df["chunk_id"] = chunks["chunk_id"].to_numpy()[df["row"].to_numpy(dtype=np.int64)]
    df["doc_id"] = chunks["doc_id"].to_numpy()[df["row"].to_numpy(dtype=np.int64)]
    df = df.astype({"rank": "int64", "score": "float64", "score_bm25": "float64", "score_dense": "float64"})
    return df[list(RESULT_COLUMNS)]


def run_retriever(
    name: str,
    retriever: Bm25Retriever | DenseRetriever | HybridRetriever,
    query_ids: Sequence[str],
    texts: Sequence[str],
    chunks: pd.DataFrame,
    depth: int,
    progress: Callable[[int, int], None] | None = None,
    folders: Sequence[Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Search every query (one at a time, timed) and return the long results table, best first per query.

    `folders[i]`, when given, restricts query i to the chunks under those folders (an empty list: no filter).
    """
    rows: list[tuple] = []
    for i, (query_id, text) in enumerate(zip(query_ids, texts, strict=True)):
        allowed = folder_rows(chunks, folders[i]) if folders is not None else None
        start = time.perf_counter()
        if isinstance(retriever, HybridRetriever):
            fusion = retriever.fuse(text, depth, allowed)
            latency = time.perf_counter() - start
            parts = fusion.components[0]
            for rank, (row, score) in enumerate(fusion.rankings[0], 1):
                lexical, semantic = parts[row]
                rows.append((query_id, name, rank, row, score, lexical.score if lexical else None,
                             semantic.score if semantic else None, latency))
        else:
            ranking = retriever.search(text, depth, allowed)
            latency = time.perf_counter() - start
            own = "score_bm25" if isinstance(retriever, Bm25Retriever) else "score_dense"
            for rank, (row, score) in enumerate(ranking, 1):
                rows.append((query_id, name, rank, row, score, score if own == "score_bm25" else None,
                             score if own == "score_dense" else None, latency))
        if progress is not None:
            progress(i + 1, len(query_ids))
    return _frame(rows, chunks)


def collapse_to_documents(results: pd.DataFrame, depth: int) -> pd.DataFrame:
    """Each document's best chunk stands for the document (BEIR-comparable ranking); ranks renumbered from 1."""
    ordered = results.sort_values(["retriever", "query_id", "rank"], kind="stable")
    best = ordered.drop_duplicates(["retriever", "query_id", "doc_id"], keep="first").copy()
    best["rank"] = best.groupby(["retriever", "query_id"]).cumcount() + 1
    return best[best["rank"] <= depth].reset_index(drop=True)
