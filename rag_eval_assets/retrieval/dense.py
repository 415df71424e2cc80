"""Dense retrieval: exact cosine search over a matrix of L2-normalised chunk vectors.

    score(q, d) = cos(e(q), e(d)) = e(q) . e(d)      (vectors are unit length)

Every chunk is a candidate (scores may be negative); a block of queries is one matrix product, cut by
`topk.top_k_block` (ties by row ascending).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, Progress, encode_cached
from rag_eval_assets.retrieval.encoders import Encoder
from rag_eval_assets.retrieval.topk import Ranking, check_depth, mask_disallowed, queries_per_block, top_k_block


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

    def search(
        self, query_texts: list[str], depth: int, allowed: Sequence[frozenset[int] | None] | None = None
    ) -> list[Ranking]:
        """Per query, the `depth` chunks with the highest cosine similarity, best first; with allowed[q] given,
        only rows in it (the cut comes after that filter, so it is exact)."""
        check_depth(depth)
        queries = encode_cached(self.encoder, query_texts, "query", self.cache)
        results: list[Ranking] = []
        step = queries_per_block(len(self.vectors))
        for start in range(0, len(queries), step):
            block = queries[start : start + step] @ self.vectors.T
            if allowed is not None:
                mask_disallowed(block, allowed[start : start + step])
            results.extend(top_k_block(block, depth))
        return results
