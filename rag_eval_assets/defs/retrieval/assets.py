"""Indexes, per-retriever results (one partition per retriever) and retrieval metric tables."""

import json
import time

import dagster as dg
import pandas as pd

from rag_eval_assets.corpus.gold import resolve_gold, with_resolved_support_groups
from rag_eval_assets.defs.partitions import retriever_partitions
from rag_eval_assets.defs.metadata import preview, upstream_versions, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.defs.retrieval.build import (
    bm25_params,
    bm25_retriever,
    dense_retriever,
    embedding_cache,
    encoder_for,
    http_client,
    hybrid_retriever,
)
from rag_eval_assets.defs.storage.parquet_io_manager import PARTITION_DIMENSIONS_KEY
from rag_eval_assets.evalset.tables import questions_for_metrics, questions_from_frame
from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.retrieval import retrieval_metrics as score_retrieval
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.embedding_cache import text_key
from rag_eval_assets.retrieval.http_sut import sut_chunks_frame, sut_results_frame
from rag_eval_assets.retrieval.index_tables import bm25_to_frame, dense_to_frame
from rag_eval_assets.retrieval.retrievers import collapse_to_documents, run_retriever
from rag_eval_assets.settings import Settings

# Chunks fetched per query before collapsing to documents, as a multiple of the deepest k (doc level only).
DOC_LEVEL_CHUNK_FACTOR = 5


@dg.asset(group_name="index", kinds={"pandas", "parquet"})
def bm25_index(
    context: dg.AssetExecutionContext, settings: RagEvalSettings, chunks: pd.DataFrame
) -> dg.Output[pd.DataFrame]:
    """BM25 weights of every (term, chunk), built once per chunk table."""
    s = settings.load()
    analyzer = get_analyzer(s.corpus.language)
    p = bm25_params(s)
    index = BM25Index.build([analyzer(t) for t in chunks["text"]], k1=p.k1, b=p.b, variant=p.variant)
    versions = upstream_versions(context, "chunks").with_part("index", analyzer=analyzer.name, bm25_variant=p.variant)
    return dg.Output(
        bm25_to_frame(index, chunks["chunk_id"]),
        metadata={"terms": len(index.terms), "chunks": index.n_docs, **version_metadata(versions)},
    )


@dg.asset(group_name="index", kinds={"pandas", "parquet", "pytorch"})
def dense_index(
    context: dg.AssetExecutionContext, settings: RagEvalSettings, chunks: pd.DataFrame
) -> dg.Output[pd.DataFrame]:
    """Unit vectors of every chunk; only chunks not in the embedding cache are encoded."""
    s = settings.load()
    encoder = encoder_for(s)
    cache = embedding_cache(s)
    try:
        texts = chunks["text"].tolist()
        known = len(cache.get(encoder.model_id, [text_key(encoder.input_text(t, "passage")) for t in texts]))
        start = time.perf_counter()
        index = DenseIndex.build(texts, encoder, cache)
        seconds = time.perf_counter() - start
    finally:
        cache.close()
    context.log.info(f"encoded {len(texts) - known} of {len(texts)} chunks in {seconds:.1f}s")
    versions = upstream_versions(context, "chunks").with_part("index", embedding_model=encoder.model_id)
    return dg.Output(
        dense_to_frame(index.vectors, chunks["chunk_id"], encoder.model_id),
        metadata={
            "embedding_model": encoder.model_id,
            "dim": encoder.dim,
            "encoded": len(texts) - known,
            "from_cache": known,
            "encode_seconds": seconds,
            **version_metadata(versions),
        },
    )


def _results(
    context: dg.AssetExecutionContext,
    s: Settings,
    name: str,
    questions: pd.DataFrame,
    chunks: pd.DataFrame,
    bm25_table: pd.DataFrame,
    dense_table: pd.DataFrame,
) -> tuple[pd.DataFrame, dict]:
    depth = max(s.k_values)
    search_depth = depth * DOC_LEVEL_CHUNK_FACTOR if s.retrieval.level == "doc" else depth
    ids, texts = questions["id"].tolist(), questions["question"].tolist()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            context.log.info(f"{name}: {done}/{total} queries")

    if name == "http":
        with http_client(s) as client:
            responses = [client.ask(text, depth) for text in texts]
        return sut_results_frame(ids, responses, name), {"name": "http", "base_url": redact_url(s.retrieval.http.base_url)}
    cache = embedding_cache(s)
    try:
        bm25 = bm25_retriever(s, bm25_table, chunks)
        if name == "bm25":
            retriever = bm25
        else:
            dense = dense_retriever(s, dense_table, chunks, cache)
            retriever = dense if name == "dense" else hybrid_retriever(s, bm25, dense)
        folders = _question_folders(questions) if s.retrieval.folder_filter else None
        results = run_retriever(name, retriever, ids, texts, chunks, search_depth, progress, folders)
    finally:
        cache.close()
    if s.retrieval.level == "doc":
        results = collapse_to_documents(results, depth)
    return results, retriever.version()


def _question_folders(evalset: pd.DataFrame) -> list[list[str]]:
    return [json.loads(value) for value in evalset["folders"]]


def retrieval_defs(settings: Settings) -> dg.Definitions:
    retrievers = retriever_partitions(settings)

    @dg.asset(
        group_name="retrieval",
        kinds={"pandas", "parquet"},
        partitions_def=retrievers,
        metadata={PARTITION_DIMENSIONS_KEY: ["retriever"]},
    )
    def retrieval_results(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        evalset: pd.DataFrame,
        chunks: pd.DataFrame,
        bm25_index: pd.DataFrame,
        dense_index: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        """The ranked chunks of every question for one retriever, depth = the largest k, with per-query latency."""
        s = settings.load()
        name = context.partition_key
        results, retriever_version = _results(context, s, name, evalset, chunks, bm25_index, dense_index)
        versions = upstream_versions(context, "evalset", "chunks", "bm25_index", "dense_index").with_part(
            "retriever", **retriever_version, depth=max(s.k_values), level=s.retrieval.level
        )
        latency = results.drop_duplicates("query_id")["latency_s"]
        return dg.Output(
            results,
            metadata={
                "retriever": name,
                "queries": int(results["query_id"].nunique()),
                "latency_p50_ms": float(latency.median() * 1000) if len(latency) else 0.0,
                "latency_p95_ms": float(latency.quantile(0.95) * 1000) if len(latency) else 0.0,
                "preview": preview(results, ["query_id", "rank", "chunk_id", "score"]),
                **version_metadata(versions),
            },
        )

    @dg.asset(
        group_name="retrieval",
        kinds={"pandas", "parquet"},
        ins={"retrieval_results": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())},
    )
    def retrieval_metrics_per_query(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        evalset: pd.DataFrame,
        chunks: pd.DataFrame,
        gold_labels: pd.DataFrame,
        retrieval_results: dict[str, pd.DataFrame],
    ) -> dg.Output[pd.DataFrame]:
        """hit, doc_hit, precision, recall, MRR, nDCG, MAP, Recall_any/all and false positives per question."""
        s = settings.load()
        question_list = questions_from_frame(evalset)
        # A support that resolved to nothing in the corpus leaves the required groups: scored on what resolved.
        questions = questions_for_metrics(with_resolved_support_groups(question_list, gold_labels))
        tables = []
        for name in sorted(retrieval_results):  # one partition in memory at a time
            results = retrieval_results[name]
            # A service under test returns its own chunks: its gold is resolved against what it returned.
            gold = resolve_gold(question_list, sut_chunks_frame(results), strict=False) if name == "http" else gold_labels
            scope = None
            if s.retrieval.folder_filter and name != "http":
                scope = {q: f for q, f in zip(evalset["id"], _question_folders(evalset)) if f}
            tables.append(
                score_retrieval(results, gold, questions, s.k_values, s.retrieval.level, folder_filter=scope,
                                chunks=chunks if scope else None)
            )
        per_query = pd.concat(tables, ignore_index=True)
        versions = upstream_versions(context, "evalset", "chunks")
        return dg.Output(per_query, metadata={"retrievers": sorted(retrieval_results), **version_metadata(versions)})

    @dg.asset(group_name="retrieval", kinds={"pandas", "parquet"})
    def retrieval_metrics(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        evalset: pd.DataFrame,
        retrieval_metrics_per_query: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        """Means per retriever, k and slice with bootstrap 95% intervals; chunk_size / overlap beside every row."""
        s = settings.load()
        questions = questions_for_metrics(questions_from_frame(evalset))
        table = aggregate_metrics(retrieval_metrics_per_query, questions)
        table["chunk_size_chars"] = s.chunking.chunk_size_chars
        table["overlap_chars"] = s.chunking.overlap_chars
        overall = table[table["slice"] == "all"].pivot_table(
            index=["retriever", "k"], columns="metric", values="value"
        ).reset_index()
        versions = upstream_versions(context, "evalset", "chunks")
        return dg.Output(
            table,
            metadata={
                "chunk_size_chars": s.chunking.chunk_size_chars,
                "overlap_chars": s.chunking.overlap_chars,
                "level": s.retrieval.level,
                "summary": dg.MetadataValue.md(
                    f"chunk_size_chars={s.chunking.chunk_size_chars}, overlap_chars={s.chunking.overlap_chars}\n\n"
                    + overall.round(4).to_markdown(index=False)
                ),
                **version_metadata(versions),
            },
        )

    return dg.Definitions(assets=[bm25_index, dense_index, retrieval_results, retrieval_metrics_per_query,
                                  retrieval_metrics])
