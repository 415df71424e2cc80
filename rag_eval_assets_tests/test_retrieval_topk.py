"""The block top-k cut every retriever uses: the same as sorting each query's candidates, ties by row."""

import numpy as np
import pytest

from rag_eval_assets.retrieval.topk import mask_disallowed, top_k, top_k_block


def test_block_cut_equals_a_full_sort_per_row_with_ties_and_non_candidates():
    rng = np.random.default_rng(3)
    # Few distinct values, so ties at the cut are common; -inf marks rows that are no candidates.
    block = rng.integers(0, 6, size=(40, 300)).astype(np.float64)
    block[rng.random(block.shape) < 0.5] = -np.inf
    block[7] = -np.inf
    for depth in (1, 5, 37, 300, 1000):
        cut = top_k_block(block, depth)
        assert len(cut) == len(block)
        for scores, ranking in zip(block, cut):
            rows = np.flatnonzero(scores > -np.inf)
            expected = sorted(((int(r), float(scores[r])) for r in rows), key=lambda h: (-h[1], h[0]))[:depth]
            assert ranking == expected
            assert ranking == (top_k(rows, scores[rows], depth) if len(rows) else [])


def test_float32_scores_come_back_as_the_same_python_floats():
    block = np.array([[0.1, 0.7, -0.3]], dtype=np.float32)
    assert top_k_block(block, 2) == [[(1, float(np.float32(0.7))), (0, float(np.float32(0.1)))]]


def test_masking_keeps_only_each_querys_allowed_rows():
    block = np.arange(12, dtype=np.float64).reshape(3, 4)
    mask_disallowed(block, [None, frozenset({0, 2}), frozenset()])
    assert top_k_block(block, 10) == [[(3, 3.0), (2, 2.0), (1, 1.0), (0, 0.0)], [(2, 6.0), (0, 4.0)], []]


def test_empty_blocks_and_bad_depth():
    assert top_k_block(np.zeros((0, 5)), 3) == []
    assert top_k_block(np.zeros((2, 0)), 3) == [[], []]
    with pytest.raises(ValueError, match="depth"):
        top_k_block(np.zeros((1, 1)), 0)


def test_only_scores_above_the_floor_are_kept_in_wide_rows_with_ties_across_groups():
    # Wide rows (many column groups per query), ties spread across groups, negative and zero scores below the floor,
    # and rows with fewer than `depth` scores above it.
    rng = np.random.default_rng(11)
    block = rng.choice([-2.0, 0.0, 0.0, 0.0, 1.5, 2.5, 3.0], size=(30, 2000), p=[0.1, 0.5, 0.2, 0.1, 0.05, 0.04, 0.01])
    block[3] = 0.0
    block[4, :] = 0.0
    block[4, [1999, 5, 700]] = 1.0
    for depth in (1, 10, 100):
        for scores, ranking in zip(block, top_k_block(block, depth, floor=0.0)):
            rows = np.flatnonzero(scores > 0)
            assert ranking == sorted(((int(r), float(scores[r])) for r in rows), key=lambda h: (-h[1], h[0]))[:depth]
    assert top_k_block(block, 10, floor=0.0)[3:5] == [[], [(5, 1.0), (700, 1.0), (1999, 1.0)]]
