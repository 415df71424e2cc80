from __future__ import annotations

import pytest

from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.hybrid import Component, convex, rrf

# One query; A and B are two retrievers' rankings of it: (row, raw score), best first.
A = [(5, 10.0), (3, 8.0), (7, 1.0)]
B = [(3, 0.9), (9, 0.8), (5, 0.1)]


def test_rrf_sums_reciprocal_ranks():
    fusion = rrf([[A], [B]], k=60, depth=10)
    assert fusion.rankings == [
        [(3, 1 / 62 + 1 / 61), (5, 1 / 61 + 1 / 63), (9, 1 / 62), (7, 1 / 63)],
    ]


def test_rrf_keeps_each_inputs_rank_and_raw_score():
    components = rrf([[A], [B]], k=60, depth=10).components[0]
    assert components[3] == (Component(rank=2, score=8.0), Component(rank=1, score=0.9))
    assert components[9] == (None, Component(rank=2, score=0.8))
    assert set(components) == {3, 5, 9, 7}


def test_rrf_cuts_at_depth_and_breaks_ties_by_row():
    # Rows 1 and 2 swap places between the inputs: equal fused scores, so row 1 comes first.
    fusion = rrf([[[(2, 5.0), (1, 4.0), (8, 1.0)]], [[(1, 0.7), (2, 0.6)]]], k=60, depth=2)
    assert fusion.rankings == [[(1, 1 / 61 + 1 / 62), (2, 1 / 61 + 1 / 62)]]
    assert set(fusion.components[0]) == {1, 2}


def test_rrf_k_changes_the_weight_of_top_ranks():
    assert rrf([[A], [B]], k=0, depth=1).rankings == [[(3, 1 / 2 + 1 / 1)]]


def test_convex_min_max_normalises_each_list_and_missing_counts_as_zero():
    # A normalised: 5 -> 1, 3 -> 7/9, 7 -> 0.  B normalised: 3 -> 1, 9 -> 0.7/0.8, 5 -> 0.
    half = convex([A], [B], alpha=0.5, depth=10).rankings[0]
    assert [row for row, _ in half] == [3, 5, 9, 7]
    assert [score for _, score in half] == pytest.approx([0.5 * 7 / 9 + 0.5, 0.5, 0.5 * 0.875, 0.0])

    heavy_a = convex([A], [B], alpha=0.8, depth=2).rankings[0]
    assert heavy_a == [(3, pytest.approx(0.8 * 7 / 9 + 0.2)), (5, pytest.approx(0.8))]


def test_convex_all_equal_scores_normalise_to_one():
    fusion = convex([[]], [[(6, 0.5), (4, 0.5)]], alpha=0.3, depth=5)
    assert fusion.rankings == [[(4, pytest.approx(0.7)), (6, pytest.approx(0.7))]]
    assert fusion.components[0][6] == (None, Component(rank=1, score=0.5))


def test_convex_is_per_query():
    rankings_a = [A, [(1, 2.0)]]
    rankings_b = [B, []]
    fusion = convex(rankings_a, rankings_b, alpha=0.5, depth=10)
    assert len(fusion.rankings) == 2
    assert fusion.rankings[1] == [(1, 0.5)]


def test_fusing_real_bm25_rankings_of_two_variants():
    docs = [["cat", "sat"], ["cat", "cat", "dog"], ["dog", "bird"], ["fish"]]
    queries = [["cat", "dog"], ["fish"], ["unicorn"]]
    lucene = BM25Index.build(docs, variant="lucene").search(queries, depth=3)
    atire = BM25Index.build(docs, variant="atire").search(queries, depth=3)
    fusion = rrf([lucene, atire], depth=3)
    assert [[row for row, _ in r] for r in fusion.rankings] == [[row for row, _ in r] for r in lucene]
    assert fusion.rankings[2] == [] and fusion.components[2] == {}


def test_inputs_must_cover_the_same_queries_and_parameters_must_be_valid():
    with pytest.raises(ValueError, match="different numbers of queries"):
        rrf([[A], [A, B]], depth=5)
    with pytest.raises(ValueError, match="alpha"):
        convex([A], [B], alpha=1.5, depth=5)
    with pytest.raises(ValueError, match="depth"):
        rrf([[A]], depth=0)
