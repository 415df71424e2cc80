"""Named retrievers over a chunk table: per-query latency, component scores, folder filters that cut exactly."""

import math

import pandas as pd
import pytest

from rag_eval_assets.retrieval import retrievers
from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.encoders import SentenceTransformerEncoder
from rag_eval_assets.retrieval.retrievers import (
    RESULT_COLUMNS,
    Bm25Retriever,
    DenseRetriever,
    HybridRetriever,
    collapse_to_documents,
    folder_rows,
    run_retriever,
)

CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["a1", "a2", "b1", "c1"],
        "doc_id": ["ops/a.md", "ops/a.md", "sw/b.md", "sw/deep/c.md"],
        "rel_path": ["ops/a.md", "ops/a.md", "sw/b.md", "sw/deep/c.md"],
        "text": [
            "telescope dome maintenance schedule",
            "dome motor maintenance every month",
            "telescope software deploy schedule",
            "dome camera software",
        ],
    }
)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder()


def _bm25() -> Bm25Retriever:
    analyzer = get_analyzer("en")
    return Bm25Retriever(BM25Index.build([analyzer(t) for t in CHUNKS["text"]]), analyzer)


def test_results_table_ranks_scores_and_latency():
    results = run_retriever("bm25", _bm25(), ["q1"], ["dome maintenance"], CHUNKS, depth=3)
    assert results["chunk_id"].tolist() == ["a1", "a2", "c1"]  # a1 is the shorter of the two full matches
    assert results["rank"].tolist() == [1, 2, 3]
    assert results["score"].is_monotonic_decreasing
    assert (results["score_lexical"] == results["score"]).all() and results["score_semantic"].isna().all()
    assert results["latency_s"].nunique() == 1 and results["latency_s"].iloc[0] > 0


def test_folder_filter_is_exact_not_a_truncated_unfiltered_list():
    # Unfiltered, the sw/ chunks rank below both ops/ chunks for this query; with depth 1 an unfiltered cut would
    # keep no sw/ chunk at all. The filter must still return the best sw/ chunk.
    retriever = _bm25()
    unfiltered = run_retriever("bm25", retriever, ["q"], ["dome maintenance"], CHUNKS, depth=1)
    assert unfiltered["chunk_id"].tolist() == ["a1"]
    filtered = run_retriever("bm25", retriever, ["q"], ["dome maintenance"], CHUNKS, depth=1, folders=[["sw"]])
    assert filtered["chunk_id"].tolist() == ["c1"]
    nested = run_retriever("bm25", retriever, ["q"], ["telescope"], CHUNKS, depth=5, folders=[["sw/deep"]])
    assert nested["chunk_id"].tolist() == []  # c1 has no "telescope"; b1 is outside sw/deep
    assert folder_rows(CHUNKS, []) is None
    assert folder_rows(CHUNKS, ["/sw/"]) == frozenset({2, 3})


def test_collapse_keeps_each_documents_best_chunk():
    results = run_retriever("bm25", _bm25(), ["q"], ["dome maintenance schedule"], CHUNKS, depth=4)
    docs = collapse_to_documents(results, depth=10)
    assert docs["doc_id"].is_unique
    assert docs["rank"].tolist() == list(range(1, len(docs) + 1))
    best_a = results[results["doc_id"] == "ops/a.md"].iloc[0]["chunk_id"]
    assert docs[docs["doc_id"] == "ops/a.md"]["chunk_id"].item() == best_a


def test_batches_give_the_same_table_and_share_an_amortised_latency(monkeypatch):
    texts = ["dome maintenance", "telescope", "software schedule", "camera", "unicorn"]
    ids = [f"q{i}" for i in range(len(texts))]
    folders = [[], ["sw"], [], ["sw"], []]
    whole = run_retriever("bm25", _bm25(), ids, texts, CHUNKS, depth=3, folders=folders)
    monkeypatch.setattr(retrievers, "QUERY_BATCH", 2)
    batched = run_retriever("bm25", _bm25(), ids, texts, CHUNKS, depth=3, folders=folders)
    columns = [c for c in RESULT_COLUMNS if c != "latency_s"]
    pd.testing.assert_frame_equal(batched[columns], whole[columns])
    assert whole["latency_s"].nunique() == 1
    # Batches {q0, q1}, {q2, q3}, {q4}: one latency per batch (q4 retrieves nothing, so it has no rows).
    per_query = batched.groupby("query_id")["latency_s"].first()
    assert per_query["q0"] == per_query["q1"] and per_query["q2"] == per_query["q3"]


def test_hybrid_hits_carry_each_components_own_score(minilm):
    bm25 = _bm25()
    dense = DenseRetriever(DenseIndex.build(CHUNKS["text"].tolist(), minilm))
    texts, folders = ["dome maintenance", "software on the telescope"], [["ops"], []]
    for method in ("rrf", "convex"):
        hybrid = HybridRetriever(bm25, dense, method, candidate_depth=4)
        results = run_retriever("hybrid", hybrid, ["a", "b"], texts, CHUNKS, depth=3, folders=folders)
        allowed = [folder_rows(CHUNKS, f) for f in folders]
        lexical = bm25.search_batch(texts, 4, allowed)
        semantic = dense.search_batch(texts, 4, allowed)
        assert all(math.isnan(hit.score_semantic) for hits in lexical for hit in hits)
        assert all(math.isnan(hit.score_lexical) for hits in semantic for hit in hits)
        for q, query_id in enumerate(["a", "b"]):
            own = results[results["query_id"] == query_id]
            assert set(own["chunk_id"]) <= set(CHUNKS["chunk_id"][sorted(allowed[q] or range(len(CHUNKS)))])
            by_row = {CHUNKS["chunk_id"][h.row]: h for h in lexical[q]}
            for chunk_id, score in zip(own["chunk_id"], own["score_lexical"]):
                assert score == by_row[chunk_id].score if chunk_id in by_row else math.isnan(score)
            by_row = {CHUNKS["chunk_id"][h.row]: h for h in semantic[q]}
            for chunk_id, score in zip(own["chunk_id"], own["score_semantic"]):
                assert score == by_row[chunk_id].score if chunk_id in by_row else math.isnan(score)
