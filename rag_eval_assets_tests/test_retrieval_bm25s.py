"""Our lucene BM25 against bm25s (method="lucene") on the same tokens: same top-10 documents and scores."""

import random

import bm25s
import numpy as np

from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets_tests.test_retrieval_bm25 import _random_queries, _stdlib_paragraphs


def test_lucene_equals_bm25s_lucene_up_to_its_constant_factor():
    analyze = get_analyzer("en")
    docs = [analyze(p) for p in _stdlib_paragraphs(400)]
    k1, b = 0.9, 0.4
    ours = BM25Index.build(docs, k1=k1, b=b, variant="lucene")
    reference = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
    reference.index(docs, show_progress=False)
    queries = [q for q in _random_queries(random.Random(2), ours.terms, 100) if q]
    found = reference.retrieve(queries, k=10, show_progress=False, n_threads=0)
    for ranking, rows, scores in zip(ours.search(queries, 10), found.documents, found.scores):
        # bm25s's lucene tf part lacks the (k1 + 1) factor of ours; it returns k rows even when some score 0.
        positive = scores > 0
        np.testing.assert_allclose([s for _, s in ranking], scores[positive] * (k1 + 1), rtol=0, atol=1e-9)
        expected = dict(zip(rows[positive].tolist(), scores[positive] * (k1 + 1)))
        for row, score in ranking:  # equal-score rows may come in another order from bm25s
            assert row in expected and abs(expected[row] - score) <= 1e-9 or score == ranking[-1][1]
