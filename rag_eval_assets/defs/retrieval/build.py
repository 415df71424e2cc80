"""Building retrievers from settings and stored index tables (shared by the index and results assets)."""

from pathlib import Path

import pandas as pd

from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Params
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache
from rag_eval_assets.retrieval.encoders import Encoder, ModelNotAvailableError, get_encoder
from rag_eval_assets.retrieval.http_sut import HttpSutClient, client_for
from rag_eval_assets.retrieval.index_tables import bm25_from_frame, dense_from_frame
from rag_eval_assets.retrieval.retrievers import Bm25Retriever, DenseRetriever, HybridRetriever
from rag_eval_assets.settings import Settings


def embedding_cache(settings: Settings) -> EmbeddingCache:
    return EmbeddingCache(Path(settings.cache_dir) / "embeddings.sqlite")


def bm25_params(settings: Settings) -> BM25Params:
    b = settings.retrieval.bm25
    return BM25Params(variant=b.variant, k1=float(b.k1), b=float(b.b), epsilon=0.25)


def bm25_retriever(settings: Settings, index_table: pd.DataFrame, chunks: pd.DataFrame) -> Bm25Retriever:
    index = bm25_from_frame(index_table, chunks["chunk_id"], bm25_params(settings))
    return Bm25Retriever(index, get_analyzer(settings.corpus.language))


def encoder_for(settings: Settings) -> Encoder:
    try:
        return get_encoder(settings.retrieval.dense.model)
    except ModelNotAvailableError as exc:
        raise ModelNotAvailableError(f"retrieval.dense.model in {settings.config_file}: {exc}") from exc


def dense_retriever(
    settings: Settings, index_table: pd.DataFrame, chunks: pd.DataFrame, cache: EmbeddingCache
) -> DenseRetriever:
    encoder = encoder_for(settings)
    vectors = dense_from_frame(index_table, chunks["chunk_id"], encoder.model_id)
    return DenseRetriever(DenseIndex(vectors, encoder, cache))


def hybrid_retriever(settings: Settings, bm25: Bm25Retriever, dense: DenseRetriever) -> HybridRetriever:
    h = settings.retrieval.hybrid
    return HybridRetriever(bm25, dense, h.method, h.rrf_k, float(h.alpha), h.candidate_depth)


def http_client(settings: Settings) -> HttpSutClient:
    return client_for(settings.retrieval.http)
