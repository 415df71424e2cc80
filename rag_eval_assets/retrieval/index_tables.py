"""Indexes as tables, so the Parquet IO manager stores them like every other asset (locally or on an object store).

BM25: one row per (term, chunk) with the term's count in the chunk (BM25's parameters apply when it is loaded). Dense: one row per chunk with its unit vector. Rows name chunks by
chunk_id, and loading maps them onto the row order of the chunk table the retriever searches.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rag_eval_assets.retrieval.bm25 import TermFrequencies


def _rows_for(chunk_ids: pd.Series, index_chunk_ids: np.ndarray, what: str) -> np.ndarray:
    position = pd.Index(chunk_ids)
    rows = position.get_indexer(index_chunk_ids)
    if (rows < 0).any():
        missing = sorted(set(np.asarray(index_chunk_ids)[rows < 0]))[:5]
        raise ValueError(f"{what} names chunks that are not in the chunk table (re-materialize it): {missing}")
    return rows


def bm25_to_frame(counts: TermFrequencies, chunk_ids: pd.Series) -> pd.DataFrame:
    coo = counts.tf.tocoo()
    terms = np.asarray(counts.terms, dtype=object)
    return pd.DataFrame(
        {"term": terms[coo.row], "chunk_id": np.asarray(chunk_ids)[coo.col], "tf": coo.data.astype(np.int32)}
    )


def bm25_from_frame(df: pd.DataFrame, chunk_ids: pd.Series) -> TermFrequencies:
    if df.empty:
        raise ValueError("the BM25 index is empty: the corpus has no indexable terms")
    terms, term_rows = np.unique(df["term"].to_numpy(dtype=object), return_inverse=True)
    cols = _rows_for(chunk_ids, df["chunk_id"].to_numpy(), "the BM25 index")
    tf = sp.csr_matrix((df["tf"].to_numpy(dtype=np.float64), (term_rows, cols)), shape=(len(terms), len(chunk_ids)))
    return TermFrequencies([str(t) for t in terms], tf)


def dense_to_frame(vectors: np.ndarray, chunk_ids: pd.Series, model_id: str) -> pd.DataFrame:
    return pd.DataFrame(
        {"chunk_id": np.asarray(chunk_ids), "model_id": model_id, "vector": list(vectors.astype(np.float32))}
    )


def dense_from_frame(df: pd.DataFrame, chunk_ids: pd.Series, model_id: str) -> np.ndarray:
    """Refuses vectors of another model than the query encoder's: their similarities would be meaningless."""
    built_with = set(df["model_id"])
    if built_with != {model_id}:
        raise ValueError(
            f"the dense index was built with {sorted(built_with)}, not {model_id!r} (re-materialize dense_index)"
        )
    if len(df) != len(chunk_ids):
        raise ValueError(f"the dense index has {len(df)} vectors for {len(chunk_ids)} chunks (re-materialize it)")
    rows = _rows_for(chunk_ids, df["chunk_id"].to_numpy(), "the dense index")
    vectors = np.empty((len(chunk_ids), len(df["vector"].iloc[0])), dtype=np.float32)
    vectors[rows] = np.stack(df["vector"].to_numpy())
    return vectors
