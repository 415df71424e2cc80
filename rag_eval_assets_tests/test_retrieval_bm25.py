from __future__ import annotations

import importlib
import inspect
import math
import random
import re

import numpy as np
import pandas as pd
import pytest
from rank_bm25 import BM25Okapi

from rag_eval_assets.retrieval import bm25
from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import TermFrequencies
from rag_eval_assets.retrieval.index_tables import bm25_from_frame, bm25_to_frame
from rag_eval_assets.retrieval.bm25 import BM25Index

_STDLIB_MODULES = (
    "json csv re argparse collections itertools functools pathlib sqlite3 logging subprocess threading unittest "
    "email urllib.parse zipfile tarfile datetime decimal fractions statistics textwrap string shutil tempfile"
).split()


def _stdlib_paragraphs(limit: int) -> list[str]:
    """Real English prose that every Python install carries: the paragraphs of standard-library docstrings."""
    paragraphs: list[str] = []
    for name in _STDLIB_MODULES:
        module = importlib.import_module(name)
        for obj in [module, *(getattr(module, attr) for attr in sorted(dir(module)) if not attr.startswith("_"))]:
            if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj):
                doc = inspect.getdoc(obj) or ""
                paragraphs.extend(p for p in re.split(r"\n\s*\n", doc) if len(p.split()) >= 5)
    return list(dict.fromkeys(paragraphs))[:limit]


def _random_corpus(rng: random.Random) -> list[list[str]]:
    vocab = [f"w{i}" for i in range(80)]
    # Zipf-like term weights so that some terms occur in more than half of the documents (negative okapi idf).
    weights = [1.0 / (i + 1) ** 0.6 for i in range(len(vocab))]
    docs = [rng.choices(vocab, weights, k=rng.randint(1, 40)) for _ in range(250)]
    docs[17] = []  # an empty document is allowed as long as the corpus has terms
    return docs


def _random_queries(rng: random.Random, vocab: list[str], n: int) -> list[list[str]]:
    queries = []
    for i in range(n):
        query = rng.choices(vocab, k=rng.randint(1, 6))
        if i % 3 == 0:
            query.append(f"absent{i}")  # a term the corpus never saw
        if i % 4 == 0:
            query.append(query[0])  # a repeated term counts twice in rank-bm25
        queries.append(query)
    return queries


def _assert_okapi_matches_rank_bm25(docs: list[list[str]], queries: list[list[str]], k1: float, b: float) -> None:
    ours = BM25Index.build(docs, k1=k1, b=b, variant="okapi", epsilon=0.25)
    reference = BM25Okapi(docs, k1=k1, b=b, epsilon=0.25)
    for query in queries:
        np.testing.assert_allclose(ours.scores(query), reference.get_scores(query), rtol=0, atol=1e-6)

    depth = 10
    for query, ranking in zip(queries, ours.search(queries, depth)):
        expected = reference.get_scores(query)
        positive = np.flatnonzero(expected > 1e-12)
        assert len(ranking) == min(depth, len(positive))
        rows = [row for row, _ in ranking]
        scores = np.array([score for _, score in ranking])
        assert np.all(np.diff(scores) <= 0)
        np.testing.assert_allclose(scores, expected[rows], rtol=0, atol=1e-6)
        left_out = np.setdiff1d(positive, rows)
        if len(left_out):
            assert expected[left_out].max() <= scores.min() + 1e-9


def test_okapi_equals_rank_bm25_on_a_random_corpus():
    rng = random.Random(7)
    docs = _random_corpus(rng)
    vocab = sorted({t for doc in docs for t in doc})
    queries = _random_queries(rng, vocab, 300)
    # The corpus must exercise the epsilon floor, or the test would not cover it.
    reference = BM25Okapi(docs)
    assert any(reference.idf[t] == pytest.approx(0.25 * reference.average_idf) for t in vocab)
    _assert_okapi_matches_rank_bm25(docs, queries, k1=1.5, b=0.75)
    _assert_okapi_matches_rank_bm25(docs, queries, k1=0.9, b=0.4)


def test_okapi_equals_rank_bm25_on_real_text():
    analyze = get_analyzer("en")
    docs = [analyze(p) for p in _stdlib_paragraphs(400)]
    assert len(docs) == 400
    rng = random.Random(11)
    vocab = sorted({t for doc in docs for t in doc})
    queries = _random_queries(rng, vocab, 150) + [analyze(d) for d in ("return a new list", "the file path", "")]
    _assert_okapi_matches_rank_bm25(docs, queries, k1=1.5, b=0.75)


def test_robertson_is_the_okapi_variant():
    docs = [["a", "b"], ["b", "c", "c"], ["d"]]
    robertson = BM25Index.build(docs, variant="robertson")
    assert robertson.params.variant == "okapi"
    okapi = BM25Index.build(docs, variant="okapi")
    np.testing.assert_array_equal(robertson.scores(["c", "d"]), okapi.scores(["c", "d"]))


def _three_docs() -> list[list[str]]:
    return [["cat", "sat", "mat"], ["cat", "cat", "dog"], ["dog", "bird"]]


def test_lucene_variant_matches_a_hand_computed_example():
    # N = 3, avgdl = 8/3, k1 = 0.9, b = 0.4.
    # Length norm k1 * (1 - b + b * dl / avgdl): dl = 3 -> 0.9 * (0.6 + 0.45) = 0.945; dl = 2 -> 0.9 * 0.9 = 0.81.
    # idf: df = 2 -> ln(1 + 1.5 / 2.5) = ln 1.6; df = 1 -> ln(1 + 2.5 / 1.5) = ln(8/3).
    index = BM25Index.build(_three_docs())
    assert index.params.variant == "lucene" and index.params.k1 == 0.9 and index.params.b == 0.4

    cat = index.search([["cat"]], depth=10)[0]
    assert [row for row, _ in cat] == [1, 0]  # doc 2 has no "cat": left out
    assert cat[0][1] == pytest.approx(math.log(1.6) * 2 * 1.9 / (2 + 0.945), abs=1e-12)
    assert cat[1][1] == pytest.approx(math.log(1.6) * 1.9 / (1 + 0.945), abs=1e-12)
    assert cat[1][1] == pytest.approx(0.4591295, abs=1e-7)

    dog_bird = index.scores(["dog", "bird"])
    np.testing.assert_allclose(
        dog_bird,
        [0.0, math.log(1.6) * 1.9 / 1.945, (math.log(1.6) + math.log(8 / 3)) * 1.9 / 1.81],
        rtol=0,
        atol=1e-12,
    )


def test_atire_idf_is_log_n_over_df_and_a_term_in_every_document_scores_nothing():
    docs = [["x", "y"], ["x"], ["x", "z", "z"]]
    index = BM25Index.build(docs, variant="atire")
    avgdl = 2.0
    expected_z = math.log(3 / 1) * 2 * 1.9 / (2 + 0.9 * (0.6 + 0.4 * 3 / avgdl))
    assert index.scores(["z"])[2] == pytest.approx(expected_z, abs=1e-12)
    assert index.search([["x"]], depth=5) == [[]]


def test_repeated_query_terms_count_per_occurrence():
    index = BM25Index.build(_three_docs())
    np.testing.assert_allclose(index.scores(["bird", "bird"]), 2 * index.scores(["bird"]))


def test_search_breaks_ties_by_row_and_cuts_at_depth():
    docs = [["b"], ["a", "x"], ["a", "x"], ["c"], ["a", "x"], ["a", "x"]]
    ranking = BM25Index.build(docs).search([["a"]], depth=3)[0]
    assert [row for row, _ in ranking] == [1, 2, 4]
    assert len({score for _, score in ranking}) == 1


def test_queries_without_known_terms_retrieve_nothing():
    index = BM25Index.build(_three_docs())
    assert index.search([["unicorn"], [], ["cat"]], depth=2)[:2] == [[], []]


def test_table_round_trip_maps_chunks_by_id_and_applies_parameters_on_load():
    index = BM25Index.build(_three_docs(), variant="okapi", k1=1.2, b=0.75)
    chunk_ids = pd.Series(["c0", "c1", "c2"])
    table = bm25_to_frame(TermFrequencies.count(_three_docs()), chunk_ids)
    loaded = bm25_from_frame(table.sample(frac=1, random_state=0), chunk_ids).with_params(index.params)
    assert loaded.params == index.params
    assert loaded.n_docs == 3
    queries = [["cat"], ["dog", "bird", "dog"], ["mat", "sat"]]
    assert loaded.search(queries, depth=3) == index.search(queries, depth=3)


@pytest.mark.parametrize("docs", [[], [[], []]])
def test_a_corpus_without_terms_is_refused(docs):
    with pytest.raises(ValueError, match="no terms"):
        BM25Index.build(docs)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="variant"):
        BM25Index.build(_three_docs(), variant="bm42")
    with pytest.raises(ValueError, match="b <= 1"):
        BM25Index.build(_three_docs(), b=1.5)
    with pytest.raises(ValueError, match="depth"):
        BM25Index.build(_three_docs()).search([["cat"]], depth=0)


def test_a_generator_of_term_lists_builds_the_same_index_as_a_list():
    analyze = get_analyzer("en")
    paragraphs = _stdlib_paragraphs(300)
    built = BM25Index.build([analyze(p) for p in paragraphs], variant="okapi")
    streamed = BM25Index.build((analyze(p) for p in paragraphs), variant="okapi")
    assert streamed.terms == built.terms
    assert (streamed.weights != built.weights).nnz == 0


def test_batched_search_with_filters_equals_scoring_each_query_alone():
    # Every query's ranking from one batched call equals its own full score vector, filtered, then cut.
    analyze = get_analyzer("en")
    index = BM25Index.build([analyze(p) for p in _stdlib_paragraphs(400)])
    rng = random.Random(5)
    queries = _random_queries(rng, index.terms, 120) + [[]]
    allowed = [None if i % 3 == 0 else frozenset(rng.sample(range(index.n_docs), 150)) for i in range(len(queries))]
    for depth in (1, 10, 500):
        for query, rows, ranking in zip(queries, allowed, index.search(queries, depth, allowed)):
            scores = index.scores(query)
            candidates = np.flatnonzero(scores > 0)
            if rows is not None:
                candidates = np.array(sorted(set(candidates.tolist()) & rows), dtype=np.int64)
            expected = sorted(((int(r), float(scores[r])) for r in candidates), key=lambda h: (-h[1], h[0]))
            assert ranking == expected[:depth]


@pytest.mark.parametrize("gather_entries", [1, 700, bm25.GATHER_ENTRIES])
def test_a_query_scores_the_sum_of_its_terms_weight_rows_however_the_batch_is_gathered(monkeypatch, gather_entries):
    # The reference sums rows of the dense weight matrix; the batch is gathered one query per step, a few queries
    # per step, or all at once.
    analyze = get_analyzer("en")
    index = BM25Index.build([analyze(p) for p in _stdlib_paragraphs(400)])
    queries = _random_queries(random.Random(8), index.terms, 150) + [[], ["absent"]]
    dense = index.weights.toarray()
    term_ids = {term: i for i, term in enumerate(index.terms)}
    expected = np.array([dense[[term_ids[t] for t in q if t in term_ids]].sum(axis=0) for q in queries])
    monkeypatch.setattr(bm25, "GATHER_ENTRIES", gather_entries)
    rankings = index.search(queries, depth=index.n_docs)
    for query, scores, ranking in zip(queries, expected, rankings):
        assert [row for row, _ in ranking] == sorted(np.flatnonzero(scores > 0), key=lambda r: (-scores[r], r))
        np.testing.assert_allclose([s for _, s in ranking], scores[[row for row, _ in ranking]], rtol=0, atol=1e-12)
        # Scored alone (one step), the query gets the very same floats.
        assert [s for _, s in ranking] == index.scores(query)[[row for row, _ in ranking]].tolist()
    assert rankings[-2:] == [[], []]
