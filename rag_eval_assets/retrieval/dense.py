"""Dense retrieval: exact cosine search over a matrix of L2-normalised chunk vectors.

    score(q, d) = cos(e(q), e(d)) = e(q) . e(d)      (vectors are unit length)

Every chunk is a candidate (scores may be negative); the top `depth` are cut with np.argpartition and sorted
stably (ties by row ascending).
"""

from __future__ import annotations


import numpy as np

from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, Progress, encode_cached
from rag_eval_assets.retrieval.encoders import Encoder
from rag_eval_assets.retrieval.ranking import Ranking, check_depth, top_k

# Queries scored per matrix product: bounds the (queries x chunks) float32 block on large corpora.
_QUERY_BATCH = 256


class DenseIndex:
    """Chunk vectors plus the encoder that made them (queries must be encoded by the same model)."""

    def __init__(self, vectors: np.ndarray, encoder: Encoder, cache: EmbeddingCache | None = None):
        self.vectors = vectors
        self.encoder = encoder
        self.cache = cache

    @property
    def model_id(self) -> str:
        return self.encoder.model_id

    @classmethod
    def build(
        cls,
        chunk_texts: list[str],
        encoder: Encoder,
        cache: EmbeddingCache | None = None,
        progress: Progress | None = None,
    ) -> DenseIndex:
        """Encodes the chunks as passages, in batches committed to the cache one by one (see encode_cached, which
        also calls `progress`); with a cache only texts it has not seen for this model are encoded."""
        return cls(encode_cached(encoder, chunk_texts, "passage", cache, progress=progress), encoder, cache)

    def search(self, query_texts: list[str], depth: int) -> list[Ranking]:
        """Per query, the `depth` chunks with the highest cosine similarity, best first."""
        check_depth(depth)
        queries = encode_cached(self.encoder, query_texts, "query", self.cache)
        rows = np.arange(len(self.vectors))
        results: list[Ranking] = []
        for start in range(0, len(queries), _QUERY_BATCH):
            block = queries[start : start + _QUERY_BATCH] @ self.vectors.T
            results.extend(top_k(rows, scores, depth) for scores in block)
        return results
