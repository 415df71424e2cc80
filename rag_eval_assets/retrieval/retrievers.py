"""The named retrievers of a run (bm25, dense, hybrid, http) and the long results table they all produce.

Queries are searched QUERY_BATCH at a time: BM25 adds each query's term weight rows into one score block, dense
scores a batch with one matrix product (topk.top_k_block cuts every query's top k in the same pass). `latency_s`
is therefore an amortised per-query latency: the wall time of the batch's `search_batch` call (analysis or query
encoding, scoring, top-k and, for hybrid, both components and the fusion) divided by the number of queries in the
batch; every query of a batch carries the same value. Building the results table is not included. It is what one
query costs in a batch evaluation, not the latency of one interactive request (which pays the fixed per-call costs
alone).

Every retriever class has `version()` and `search_batch(texts, depth, allowed)`, which returns per query its hits
as topk.Hit (row, score, score_lexical, score_semantic: each role's raw score, NaN for a role that took no part), so
callers treat all retrievers alike.

A folder filter (seed 002's folder selection) restricts a query to the chunks under its folders: the full ranking
is computed and cut after filtering, so the top k is exact rather than what survives of an unfiltered top k.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

import numpy as np
import pandas as pd

from rag_eval_assets.retrieval.analyzers import Analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.hybrid import Fusion, convex, rrf
from rag_eval_assets.retrieval.topk import Hit, Ranking, role_hits

# Queries per search_batch call. Memory is bounded inside the indexes (topk.BLOCK_CELLS), so this only sets how
# often progress is reported and how many queries share one latency figure.
QUERY_BATCH = 256

RESULT_COLUMNS = (
    "query_id",
    "retriever",
    "rank",
    "chunk_id",
    "doc_id",
    "score",
    "score_lexical",
    "score_semantic",
    "latency_s",
)


class Retriever(Protocol):
    """What run_retriever needs: hits for a batch of query texts."""

    def search_batch(
        self, texts: Sequence[str], depth: int, allowed: Sequence[frozenset[int] | None] | None = None
    ) -> list[list[Hit]]: ...


@dataclass
class Bm25Retriever:
    index: BM25Index
    analyzer: Analyzer

    def rankings(self, texts: Sequence[str], depth: int,
                 allowed: Sequence[frozenset[int] | None] | None = None) -> list[Ranking]:
        return self.index.search([self.analyzer(text) for text in texts], depth, allowed)

    def search_batch(self, texts: Sequence[str], depth: int,
                     allowed: Sequence[frozenset[int] | None] | None = None) -> list[list[Hit]]:
        return role_hits(self.rankings(texts, depth, allowed), "lexical")


@dataclass
class DenseRetriever:
    index: DenseIndex

    def rankings(self, texts: Sequence[str], depth: int,
                 allowed: Sequence[frozenset[int] | None] | None = None) -> list[Ranking]:
        return self.index.search(list(texts), depth, allowed)

    def search_batch(self, texts: Sequence[str], depth: int,
                     allowed: Sequence[frozenset[int] | None] | None = None) -> list[list[Hit]]:
        return role_hits(self.rankings(texts, depth, allowed), "semantic")


class Ranker(Protocol):
    """A retriever that can take part in a fusion: its plain rankings."""

    def rankings(self, texts: Sequence[str], depth: int,
                 allowed: Sequence[frozenset[int] | None] | None = None) -> list[Ranking]: ...


@dataclass
class HybridRetriever:
    """Fuses a lexical and a semantic retriever over `candidate_depth` candidates each, by rank (rrf) or normalised
    score (convex)."""

    lexical: Ranker
    semantic: Ranker
    method: str = "rrf"
    rrf_k: int = 60
    alpha: float = 0.5
    candidate_depth: int = 100

    def fuse(self, texts: Sequence[str], depth: int,
             allowed: Sequence[frozenset[int] | None] | None = None) -> Fusion:
        candidates = max(depth, self.candidate_depth)
        lexical = self.lexical.rankings(texts, candidates, allowed)
        semantic = self.semantic.rankings(texts, candidates, allowed)
        if self.method == "rrf":
            return rrf([lexical, semantic], k=self.rrf_k, depth=depth)
        return convex(lexical, semantic, alpha=self.alpha, depth=depth)

    def search_batch(self, texts: Sequence[str], depth: int,
                     allowed: Sequence[frozenset[int] | None] | None = None) -> list[list[Hit]]:
        fusion = self.fuse(texts, depth, allowed)
        return [[Hit(row, score, *(part.score if part else math.nan for part in parts[row]))
                 for row, score in ranking]
                for ranking, parts in zip(fusion.rankings, fusion.components)]


def folder_rows(chunks: pd.DataFrame, folders: Sequence[str]) -> frozenset[int] | None:
    """Row positions of the chunks under any of `folders` (POSIX prefixes of rel_path); None = no filter."""
    prefixes = [f.strip("/") + "/" for f in folders if f.strip("/")]
    if not prefixes:
        return None
    under = chunks["rel_path"].map(lambda path: any(path.startswith(p) for p in prefixes)).to_numpy()
    return frozenset(np.flatnonzero(under).tolist())


def _frame(name: str, query_ids: list[str], hits: list[list[Hit]], latencies: list[float],
           chunks: pd.DataFrame) -> pd.DataFrame:
    """The long table of every query's hits, built column-wise with numpy (no per-row Python objects)."""
    counts = np.fromiter(map(len, hits), dtype=np.int64, count=len(hits))
    # Every hit's four fields in one flat run: fromiter reads them without numpy inspecting each hit as a sequence.
    fields = chain.from_iterable(chain.from_iterable(hits))
    flat = np.fromiter(fields, dtype=np.float64, count=4 * int(counts.sum())).reshape(-1, 4)
    rows = flat[:, 0].astype(np.int64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return pd.DataFrame({
        "query_id": np.repeat(np.asarray(query_ids, dtype=object), counts),
        "retriever": np.full(len(rows), name, dtype=object),
        "rank": np.arange(len(rows), dtype=np.int64) - starts + 1,
        "chunk_id": chunks["chunk_id"].to_numpy()[rows],
        "doc_id": chunks["doc_id"].to_numpy()[rows],
        "score": flat[:, 1],
        "score_lexical": flat[:, 2],
        "score_semantic": flat[:, 3],
        "latency_s": np.repeat(np.asarray(latencies, dtype=np.float64), counts),
    }, columns=list(RESULT_COLUMNS))


def run_retriever(
    name: str,
    retriever: Retriever,
    query_ids: Sequence[str],
    texts: Sequence[str],
    chunks: pd.DataFrame,
    depth: int,
    progress: Callable[[int, int], None] | None = None,
    folders: Sequence[Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Search the queries in batches of QUERY_BATCH and return the long results table, best first per query.

    `folders[i]`, when given, restricts query i to the chunks under those folders (an empty list: no filter).
    `progress(done, total)` is called after each batch.
    """
    if len(query_ids) != len(texts) or (folders is not None and len(folders) != len(texts)):
        raise ValueError(f"{len(query_ids)} query ids, {len(texts)} texts"
                         + ("" if folders is None else f" and {len(folders)} folder lists") + ": must be equal")
    scope: dict[tuple[str, ...], frozenset[int] | None] = {}
    hits: list[list[Hit]] = []
    latencies: list[float] = []
    for start in range(0, len(texts), QUERY_BATCH):
        batch = list(texts[start : start + QUERY_BATCH])
        allowed = None
        if folders is not None:
            keys = [tuple(f) for f in folders[start : start + QUERY_BATCH]]
            for key in keys:
                if key not in scope:  # many queries share a folder list; each list is resolved once
                    scope[key] = folder_rows(chunks, key)
            allowed = [scope[key] for key in keys]
        began = time.perf_counter()
        found = retriever.search_batch(batch, depth, allowed)
        latencies += [(time.perf_counter() - began) / len(batch)] * len(batch)
        hits += found
        if progress is not None:
            progress(min(start + QUERY_BATCH, len(texts)), len(texts))
    return _frame(name, list(query_ids), hits, latencies, chunks)


def collapse_to_documents(results: pd.DataFrame, depth: int) -> pd.DataFrame:
    """Each document's best chunk stands for the document (BEIR-comparable ranking); ranks renumbered from 1."""
    ordered = results.sort_values(["retriever", "query_id", "rank"], kind="stable")
    best = ordered.drop_duplicates(["retriever", "query_id", "doc_id"], keep="first").copy()
    best["rank"] = best.groupby(["retriever", "query_id"]).cumcount() + 1
    return best[best["rank"] <= depth].reset_index(drop=True)
