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

The weights live in a CSR matrix with one row per vocabulary term and one column per document, so a query's scores
are the sum of its terms' rows. A batch of queries is scored into a dense (queries x documents) block for the top-k
cut (`_score_block`): the rows of every query's terms are gathered, repeats included, and added into the block,
rather than going through a sparse product whose sparse output would be made dense anyway (on a small corpus most
cells of the block are non-zero).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import scipy.sparse as sp

from rag_eval_assets.retrieval.topk import Ranking, check_depth, mask_disallowed, queries_per_block, top_k_block

VARIANTS = ("lucene", "okapi", "robertson", "atire")
# Weight entries one step of `_score_block` gathers (2**17: 1.5 MiB with their column indices). Gathering a whole
# batch at once needs a buffer of several MiB per batch that the allocator maps fresh each time, and on a small
# corpus the page faults cost more than the additions; a buffer this size is reused from one step to the next.
GATHER_ENTRIES = 2**17
_ALIASES = {"robertson": "okapi"}


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
    """What BM25 is computed from: the sorted vocabulary and a CSR matrix of term counts (terms x documents, each
    term's documents ascending). Stored as the index table, so k1, b and the variant apply when a retriever is built,
    and BM25 variants with other parameters share one index."""

    terms: list[str]
    tf: sp.csr_matrix

    @classmethod
    def count(cls, tokenized_docs: Iterable[Sequence[str]]) -> TermFrequencies:
        """Counts documents given as term lists, in one pass: a generator of term lists works as well as a list, so
        a corpus never has to be held tokenized in memory (only one int32 term id and one tf per distinct term of
        each document are kept)."""
        # Per (document, distinct term) entry, in document order: the term's id in order of first sight, and its tf.
        term_ids: dict[str, int] = {}
        entry_term, entry_tf, doc_len, doc_terms = array("i"), array("i"), array("q"), array("q")
        for doc in tokenized_docs:
            counts = Counter(doc)
            entry_term.extend([term_ids.setdefault(term, len(term_ids)) for term in counts])
            entry_tf.extend(counts.values())
            doc_len.append(len(doc))
            doc_terms.append(len(counts))
        n_docs = len(doc_len)
        if sum(doc_len) == 0:
            raise ValueError(
                f"cannot build a BM25 index: the corpus has {n_docs} document(s) and no terms "
                "(empty corpus, or every document analyzed to nothing)"
            )
        # Term rows in sorted term order, as a stored index (index_tables) loads them.
        terms = sorted(term_ids)
        sorted_row = np.empty(len(terms), dtype=np.int32)
        sorted_row[np.fromiter((term_ids[t] for t in terms), dtype=np.int64, count=len(terms))] = np.arange(
            len(terms), dtype=np.int32
        )
        del term_ids
        term_of_entry = sorted_row[np.frombuffer(entry_term, dtype=np.int32)]
        del entry_term
        doc_of_entry = np.repeat(np.arange(n_docs, dtype=np.int32), np.frombuffer(doc_terms, dtype=np.int64))
        # Entries are in document order, so a stable sort by term leaves each term's documents ascending.
        by_term = np.argsort(term_of_entry, kind="stable")
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_of_entry, minlength=len(terms)), out=indptr[1:])
        tf = np.frombuffer(entry_tf, dtype=np.int32)[by_term].astype(np.float64)
        return cls(terms, sp.csr_matrix((tf, doc_of_entry[by_term], indptr), shape=(len(terms), n_docs)))

    def with_params(self, params: BM25Params) -> BM25Index:
        """The BM25 weights of every (term, document) under `params`."""
        variant = _ALIASES.get(params.variant, params.variant)
        if variant not in VARIANTS:
            raise ValueError(f"unknown BM25 variant {params.variant!r}; valid: {', '.join(VARIANTS)}")
        k1, b = float(params.k1), float(params.b)
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        params = BM25Params(variant, k1, b, float(params.epsilon))
        tf = self.tf
        lengths = np.bincount(tf.indices, weights=tf.data, minlength=tf.shape[1])
        idf = _idf(variant, tf.shape[1], np.diff(tf.indptr).astype(np.float64), params.epsilon)
        length_norm = k1 * (1.0 - b + b * lengths / lengths.mean())
        term_of_entry = np.repeat(np.arange(len(self.terms), dtype=np.int32), np.diff(tf.indptr))
        weight = idf[term_of_entry] * (tf.data * (k1 + 1.0) / (tf.data + length_norm[tf.indices]))
        return BM25Index(params, self.terms, sp.csr_matrix((weight, tf.indices, tf.indptr), shape=tf.shape))


class BM25Index:
    """A built BM25 index (`BM25Index.build`, or `TermFrequencies.with_params`)."""

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
        tokenized_docs: Iterable[Sequence[str]],
        k1: float = 0.9,
        b: float = 0.4,
        variant: str = "lucene",
        epsilon: float = 0.25,
    ) -> BM25Index:
        return TermFrequencies.count(tokenized_docs).with_params(BM25Params(variant, k1, b, epsilon))

    def _score_block(self, tokenized_queries: Sequence[Sequence[str]]) -> np.ndarray:
        """(queries x documents) scores, float64. Terms absent from the index are dropped (they score 0 in every
        variant); a repeated term counts once per occurrence."""
        term_ids = self._term_ids
        per_query = [[term_ids[t] for t in tokens if t in term_ids] for tokens in tokenized_queries]
        n_queries, indptr = len(per_query), self.weights.indptr
        bounds = np.zeros(n_queries + 1, dtype=np.int64)  # query q's terms are ids[bounds[q]:bounds[q + 1]]
        np.cumsum([len(ids) for ids in per_query], out=bounds[1:])
        ids = np.fromiter(chain.from_iterable(per_query), dtype=np.int64, count=int(bounds[-1]))
        entries = np.zeros(len(ids) + 1, dtype=np.int64)  # weights entries in the rows of the terms before each
        np.cumsum(indptr[ids + 1] - indptr[ids], out=entries[1:])
        entries = entries[bounds]
        block = np.zeros((n_queries, self.n_docs))
        start = 0
        while start < n_queries:
            # The queries from `start` on whose term rows hold at most GATHER_ENTRIES entries (at least one query).
            stop = max(start + 1, int(np.searchsorted(entries, entries[start] + GATHER_ENTRIES, side="right")) - 1)
            rows = self.weights[ids[bounds[start] : bounds[stop]]]
            # Each query's gathered term rows stacked into its one row: scipy's csr_todense adds every entry into
            # its cell, so duplicate columns are summed, which is the query's score.
            stacked = sp.csr_matrix((rows.data, rows.indices, rows.indptr[bounds[start : stop + 1] - bounds[start]]),
                                    shape=(stop - start, self.n_docs))
            stacked.toarray(out=block[start:stop])
            start = stop
        return block

    def scores(self, tokenized_query: Sequence[str]) -> np.ndarray:
        """The BM25 score of every document for one query (float64, length n_docs)."""
        return self._score_block([tokenized_query])[0]

    def search(
        self,
        tokenized_queries: Sequence[Sequence[str]],
        depth: int,
        allowed: Sequence[frozenset[int] | None] | None = None,
    ) -> list[Ranking]:
        """Per query, at most `depth` (row, score) pairs, best first; documents scoring <= 0 are left out, and so
        are rows outside allowed[q] when given (the cut comes after that filter, so it is exact).

        Queries are scored a block at a time (topk.BLOCK_CELLS bounds the block); a document outside allowed[q]
        gets -inf, and `top_k_block` cuts every query of the block at once, keeping only scores above 0.
        """
        check_depth(depth)
        results: list[Ranking] = []
        step = queries_per_block(self.n_docs)
        for start in range(0, len(tokenized_queries), step):
            block = self._score_block(tokenized_queries[start : start + step])
            if allowed is not None:
                mask_disallowed(block, allowed[start : start + step])
            results.extend(top_k_block(block, depth, floor=0.0))
        return results
