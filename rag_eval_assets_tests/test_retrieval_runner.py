"""Named retrievers over a chunk table: per-query latency, component scores, folder filters that cut exactly."""

import pandas as pd

from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.retrievers import Bm25Retriever, collapse_to_documents, folder_rows, run_retriever

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


def _bm25() -> Bm25Retriever:
    analyzer = get_analyzer("en")
    return Bm25Retriever(BM25Index.build([analyzer(t) for t in CHUNKS["text"]]), analyzer)


def test_results_table_ranks_scores_and_latency():
    results = run_retriever("bm25", _bm25(), ["q1"], ["dome maintenance"], CHUNKS, depth=3)
    assert results["chunk_id"].tolist() == ["a1", "a2", "c1"]  # a1 is the shorter of the two full matches
    assert results["rank"].tolist() == [1, 2, 3]
    assert results["score"].is_monotonic_decreasing
    assert (results["score_bm25"] == results["score"]).all() and results["score_dense"].isna().all()
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
