"""BM25 over scipy.sparse: every (term, document) weight is computed once at index time; a query is a sum of rows.

For a term t and a document d (N documents, df(t) of them contain t, tf = count of t in d, dl = length of d in
terms, avgdl = mean dl):

    weight(t, d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    score(q, d)  = sum over the query's terms, repeats included, of weight(t, d)

Repeated query terms count once per occurrence, as in rank-bm25's BM25Okapi.get_scores. The variants differ in idf:

- "lucene" (Anserini's default, k1=0.9 b=0.4): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), always > 0.
- "okapi" (alias "robertson"), exactly rank-bm25's BM25Okapi: idf = ln(N - df + 0.5) - ln(df + 0.5); a negative
  idf (df > N/2) is replaced by epsilon * (mean idf over the vocabulary, before replacement), epsilon=0.25.
- "atire": idf = ln(N / df).

The weights live in a CSR matrix with one row per vocabulary term and one column per document, so the scores of a
batch of queries are one sparse product: (query-term counts, queries x terms) @ (weights, terms x documents).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np
import scipy.sparse as sp

from rag_eval_assets.retrieval.ranking import Ranking, check_depth, top_k

VARIANTS = ("lucene", "okapi", "robertson", "atire")
_ALIASES = {"robertson": "okapi"}
# Queries scored per sparse product: bounds the (queries x documents) intermediate on large corpora.
_QUERY_BATCH = 512


@dataclass(frozen=True)
class BM25Params:
    """What goes into the retriever's version tuple. `epsilon` only matters for "okapi"."""

    variant: str
    k1: float
    b: float
    epsilon: float


def _idf(variant: str, n_docs: int, df: np.ndarray, epsilon: float) -> np.ndarray:
    if variant == "lucene":
        return np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    if variant == "atire":
        return np.log(n_docs / df)
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    idf[idf < 0] = epsilon * idf.mean()
    return idf


@dataclass(frozen=True)
class TermFrequencies:
    """What BM25 is computed from: the vocabulary and a CSR matrix of term counts (terms x documents). Stored as
    the index table, so k1, b and the variant are applied when a retriever is built, not when the index is."""

    terms: list[str]
    tf: sp.csr_matrix

    @classmethod
    def count(cls, tokenized_docs: list[list[str]]) -> TermFrequencies:
        doc_len = np.array([len(doc) for doc in tokenized_docs], dtype=np.int64)
        if doc_len.sum() == 0:
            raise ValueError(
                f"cannot build a BM25 index: the corpus has {len(tokenized_docs)} document(s) and no terms "
                "(empty corpus, or every document analyzed to nothing)"
            )
        terms = sorted(set(chain.from_iterable(tokenized_docs)))
        term_ids = {term: i for i, term in enumerate(terms)}
        flat_terms = np.fromiter((term_ids[t] for t in chain.from_iterable(tokenized_docs)), dtype=np.int64)
        flat_docs = np.repeat(np.arange(len(tokenized_docs)), doc_len)
        # COO -> CSR sums the duplicate (term, doc) entries: data becomes tf, and each row's length is df.
        tf = sp.coo_matrix(
            (np.ones(len(flat_terms)), (flat_terms, flat_docs)), shape=(len(terms), len(tokenized_docs))
        ).tocsr()
        return cls(terms, tf)

    def with_params(self, params: BM25Params) -> BM25Index:
        variant = _ALIASES.get(params.variant, params.variant)
        if variant not in VARIANTS:
            raise ValueError(f"unknown BM25 variant {params.variant!r}; valid: {', '.join(VARIANTS)}")
        k1, b = float(params.k1), float(params.b)
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        params = BM25Params(variant, k1, b, float(params.epsilon))
        tf = self.tf
        doc_len = np.asarray(tf.sum(axis=0), dtype=np.float64).ravel()
        df = np.diff(tf.indptr).astype(np.float64)
        idf = _idf(variant, tf.shape[1], df, params.epsilon)
        length_norm = k1 * (1.0 - b + b * doc_len / doc_len.mean())
        term_of_entry = np.repeat(np.arange(len(self.terms)), np.diff(tf.indptr))
        tf_part = tf.data * (k1 + 1.0) / (tf.data + length_norm[tf.indices])
        weights = sp.csr_matrix((idf[term_of_entry] * tf_part, tf.indices, tf.indptr), shape=tf.shape)
        return BM25Index(params, self.terms, weights)


class BM25Index:
    """A built BM25 index (`BM25Index.build`); `index_tables` stores it as a table."""

    def __init__(self, params: BM25Params, terms: list[str], weights: sp.csr_matrix):
        self.params = params
        self.terms = terms
        self.weights = weights
        self._term_ids = {term: i for i, term in enumerate(terms)}

    @property
    def n_docs(self) -> int:
        return self.weights.shape[1]

    @classmethod
    def build(
        cls,
        tokenized_docs: list[list[str]],
        k1: float = 0.9,
        b: float = 0.4,
        variant: str = "lucene",
        epsilon: float = 0.25,
    ) -> BM25Index:
        return TermFrequencies.count(tokenized_docs).with_params(BM25Params(variant, k1, b, epsilon))

    def _query_matrix(self, tokenized_queries: list[list[str]]) -> sp.csr_matrix:
        """Queries x terms counts; terms absent from the index are dropped (they score 0 in every variant)."""
        rows, cols = [], []
        for q, tokens in enumerate(tokenized_queries):
            ids = [self._term_ids[t] for t in tokens if t in self._term_ids]
            rows.extend([q] * len(ids))
            cols.extend(ids)
        shape = (len(tokenized_queries), len(self.terms))
        return sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=shape).tocsr()

    def scores(self, tokenized_query: list[str]) -> np.ndarray:
        """The BM25 score of every document for one query (float64, length n_docs)."""
        return (self._query_matrix([tokenized_query]) @ self.weights).toarray().ravel()

    def search(self, tokenized_queries: list[list[str]], depth: int) -> list[Ranking]:
        """Per query, at most `depth` (row, score) pairs, best first; documents scoring <= 0 are left out."""
        check_depth(depth)
        results: list[Ranking] = []
        for start in range(0, len(tokenized_queries), _QUERY_BATCH):
            batch = self._query_matrix(tokenized_queries[start : start + _QUERY_BATCH]) @ self.weights
            for q in range(batch.shape[0]):
                row = slice(batch.indptr[q], batch.indptr[q + 1])
                docs, scores = batch.indices[row], batch.data[row]
                positive = scores > 0
                results.append(top_k(docs[positive], scores[positive], depth) if positive.any() else [])
        return results
