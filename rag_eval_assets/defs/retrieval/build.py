"""Building retrievers from settings and stored index tables (shared by the index and results assets)."""

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache
from rag_eval_assets.retrieval.encoders import Encoder, EncoderConfigError, ModelNotAvailableError, get_encoder
from rag_eval_assets.retrieval.index_tables import bm25_from_frame, dense_from_frame
from rag_eval_assets.retrieval.kinds.bm25 import BM25_INDEX
from rag_eval_assets.retrieval.kinds.dense import DenseParams
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, needs_of
from rag_eval_assets.settings import Settings


def embedding_cache(settings: Settings) -> EmbeddingCache:
    return EmbeddingCache(Path(settings.cache_dir) / "embeddings.sqlite")


def encoder_for(settings: Settings, params: DenseParams) -> Encoder:
    try:
        return get_encoder(params.model, device=params.device, backend=params.backend, cache_dir=settings.cache_dir)
    except (ModelNotAvailableError, EncoderConfigError) as exc:
        users = [name for name, v in settings.variants.items()
                 if any(n.spec == params for n in needs_of({name: v}, settings.corpus.language))]
        where = ", ".join(f"retrievers.{name}" for name in users if name not in ("dense", "hybrid"))
        key = "model" if isinstance(exc, ModelNotAvailableError) else "device / backend"
        raise type(exc)(
            f"retrieval.dense.{key}{' of ' + where if where else ''} in {settings.config_file}: {exc}") from exc


def built_indexes(settings: Settings, chunks: pd.DataFrame, tables: Mapping[tuple[str, str], pd.DataFrame],
                  cache: EmbeddingCache) -> BuiltIndexes:
    """Indexes loaded from their tables (by (family, key)) on first use, each once."""
    loaded: dict[tuple[str, str], object] = {}

    def get(need: IndexNeed):
        key = (need.family, need.key)
        if key not in loaded:
            table = tables[key]
            if need.family == BM25_INDEX:
                loaded[key] = bm25_from_frame(table, chunks["chunk_id"])
            else:
                encoder = encoder_for(settings, need.spec)
                loaded[key] = DenseIndex(dense_from_frame(table, chunks["chunk_id"], encoder.model_id), encoder, cache)
        return loaded[key]

    return BuiltIndexes(chunks, settings.corpus.language, get)
