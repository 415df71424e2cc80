"""Hand-computed retrieval metrics: the seeds' worked formulas, the undefined-value rules, supports, scope."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.retrieval import METRICS, PER_QUERY_COLUMNS, retrieval_metrics

GOLD_COLUMNS = ["query_id", "chunk_id", "doc_id", "grade", "support_index", "source"]


def results_frame(lists: dict[str, list[str]], retriever: str = "bm25") -> pd.DataFrame:
    """Chunk ids in rank order per query; chunk "D.n" belongs to document "D", score falls with rank."""
    rows = [
        (q, retriever, rank, chunk, chunk.split(".")[0], 1.0 / rank)
        for q, chunks in lists.items()
        for rank, chunk in enumerate(chunks, start=1)
    ]
    return pd.DataFrame(rows, columns=["query_id", "retriever", "rank", "chunk_id", "doc_id", "score"]).astype(
        {"rank": "int64", "score": "float64"}
    )


def gold_frame(rows: list[tuple[str, str, int, int, str]]) -> pd.DataFrame:
    """(query_id, chunk_id, grade, support_index, source) rows; the doc id is the chunk id's prefix."""
    full = [(q, c, c.split(".")[0], g, s, src) for q, c, g, s, src in rows]
    return pd.DataFrame(full, columns=GOLD_COLUMNS).astype({"grade": "int64", "support_index": "int64"})


def questions_frame(*specs: dict) -> pd.DataFrame:
    defaults = {
        "type": "fact",
        "category": None,
        "difficulty": "easy",
        "tags": [],
        "is_negative": False,
        "required_support_groups": None,
        "folders": [],
    }
    return pd.DataFrame([{**defaults, **spec} for spec in specs])


def values(per_query: pd.DataFrame, query_id: str, k: int, retriever: str = "bm25") -> dict[str, float]:
    rows = per_query[
        (per_query["query_id"] == query_id) & (per_query["k"] == k) & (per_query["retriever"] == retriever)
    ]
    return dict(zip(rows["metric"], rows["value"]))


def test_seed_004_worked_example_gold_at_zero_based_position_two() -> None:
    per_query = retrieval_metrics(
        results_frame({"q": ["a.1", "b.1", "g.1", "c.1"]}),
        gold_frame([("q", "g.1", 1, -1, "gold_chunk_ids")]),
        questions_frame({"query_id": "q"}),
    )
    at1, at3, at5 = (values(per_query, "q", k) for k in (1, 3, 5))
    assert at1["mrr@k"] == 0.0 and at1["hit@k"] == 0.0 and at1["ndcg@k"] == 0.0
    assert at3["mrr@k"] == pytest.approx(1 / 3)  # 1 / (pos + 1) with pos = 2
    assert at3["ndcg@k"] == pytest.approx(1 / math.log2(2 + 2))  # DCG 1/log2(i+2), IDCG 1
    assert at3["hit@k"] == 1.0
    assert at3["precision@k"] == pytest.approx(1 / 3)
    assert at3["recall@k"] == 1.0
    assert at3["map@k"] == pytest.approx(1 / 3)
    # Four results, k = 5: precision still divides by k, as trec_eval's P does.
    assert at5["precision@k"] == pytest.approx(1 / 5)


def test_graded_ndcg_uses_the_grade_as_gain_and_the_ideal_order() -> None:
    per_query = retrieval_metrics(
        results_frame({"q": ["b.1", "x.1", "a.1"]}),
        gold_frame([("q", "a.1", 3, -1, "gold_chunk_ids"), ("q", "b.1", 1, -1, "gold_chunk_ids")]),
        questions_frame({"query_id": "q"}),
    )
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 1 / math.log2(3)
    assert values(per_query, "q", 3)["ndcg@k"] == pytest.approx(dcg / ideal)
    assert values(per_query, "q", 1)["ndcg@k"] == pytest.approx(1 / 3)  # grade 1 where grade 3 was possible


def test_map_divides_by_every_relevant_id_not_only_the_retrieved_ones() -> None:
    per_query = retrieval_metrics(
        results_frame({"q": ["a.1", "x.1", "b.1"]}),
        gold_frame([("q", c, 1, -1, "gold_chunk_ids") for c in ("a.1", "b.1", "c.1")]),
        questions_frame({"query_id": "q"}),
    )
    assert values(per_query, "q", 1)["map@k"] == pytest.approx(1 / 3)
    assert values(per_query, "q", 3)["map@k"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert values(per_query, "q", 3)["recall@k"] == pytest.approx(2 / 3)


def test_seed_001_incomplete_labels_doc_gold_only() -> None:
    """No chunk-precise gold but doc gold: hit@k = 0, doc_hit@k computed, the rest undefined (None -> NaN)."""
    gold = gold_frame([("q", "d.1", 1, -1, "gold_doc_ids"), ("q", "d.2", 1, -1, "gold_doc_ids")])
    results = results_frame({"q": ["x.1", "d.2"]})
    chunk_level = values(retrieval_metrics(results, gold, questions_frame({"query_id": "q"})), "q", 3)
    assert chunk_level["hit@k"] == 0.0
    assert chunk_level["doc_hit@k"] == 1.0
    for name in ("precision@k", "recall@k", "mrr@k", "ndcg@k", "map@k", "recall_any@k", "recall_all@k"):
        assert math.isnan(chunk_level[name]), name
    # At doc level the same labels are complete: d is relevant and sits at position 2 of the doc list.
    doc_level = values(retrieval_metrics(results, gold, questions_frame({"query_id": "q"}), level="doc"), "q", 3)
    assert doc_level["hit@k"] == doc_level["doc_hit@k"] == 1.0
    assert doc_level["mrr@k"] == pytest.approx(0.5)
    assert doc_level["recall@k"] == 1.0


def test_unlabelled_question_has_no_defined_metric() -> None:
    per_query = retrieval_metrics(results_frame({"q": ["a.1"]}), gold_frame([]), questions_frame({"query_id": "q"}))
    assert per_query["value"].isna().all()


def test_scored_on_labels_decide_the_questions_a_gold_never_returned_is_a_miss() -> None:
    """A service judged on the gold resolved among its own chunks is scored on the questions the corpus labels."""
    corpus_gold = gold_frame([("q1", "a.1", 1, 0, "gold_supports"), ("q2", "b.1", 1, 0, "gold_supports")])
    # Its ids are its own: q1's gold resolved to the chunk it returned at rank 2, q2's to nothing it returned, and
    # r (unlabelled in our corpus) resolved to one of its chunks.
    own_gold = gold_frame([("q1", "s.2", 1, 0, "gold_supports"), ("r", "s.9", 1, 0, "gold_supports")])
    results = results_frame({"q1": ["s.1", "s.2"], "q2": ["s.3"], "r": ["s.9"]}, retriever="http")
    questions = questions_frame({"query_id": "q1"}, {"query_id": "q2"}, {"query_id": "r"},
                                {"query_id": "n", "is_negative": True})
    per_query = retrieval_metrics(results, own_gold, questions, ks=(1, 5), scored_on=corpus_gold)
    q1 = values(per_query, "q1", 5, "http")
    assert (q1["hit@k"], q1["mrr@k"], q1["recall@k"]) == (1.0, 0.5, 1.0)
    assert q1["ndcg@k"] == pytest.approx(1 / math.log2(3))
    for k in (1, 5):
        q2 = values(per_query, "q2", k, "http")
        assert {name: q2[name] for name in METRICS[:9]} == dict.fromkeys(METRICS[:9], 0.0), k
        assert math.isnan(q2["false_positive@k"])
        assert all(math.isnan(v) for v in values(per_query, "r", k, "http").values())
    assert values(per_query, "n", 5, "http")["hit@k"] == 0.0
    # Without scored_on the question it never returned gold for is left out and r is scored: the kinder view.
    alone = retrieval_metrics(results, own_gold, questions, ks=(5,))
    assert math.isnan(values(alone, "q2", 5, "http")["hit@k"]) and values(alone, "r", 5, "http")["hit@k"] == 1.0


def test_named_retrievers_are_scored_even_with_no_result_row() -> None:
    """A service whose every call failed retrieved nothing: it scores 0 on each labelled question, not vanishes."""
    gold = gold_frame([("q", "a.1", 1, -1, "gold_chunk_ids")])
    per_query = retrieval_metrics(results_frame({}, retriever="http"), gold, questions_frame({"query_id": "q"}),
                                  ks=(3,), retrievers=["http"])
    assert values(per_query, "q", 3, "http")["hit@k"] == 0.0
    assert values(per_query, "q", 3, "http")["ndcg@k"] == 0.0
    assert set(per_query["retriever"]) == {"http"}


def test_negative_questions_score_zero_hits_and_a_false_positive_for_labelled_items() -> None:
    gold = gold_frame(
        [
            ("pos", "a.1", 1, -1, "gold_chunk_ids"),
            # A stray label on a negative question is ignored: negatives have no gold.
            ("neg", "n.1", 1, -1, "gold_chunk_ids"),
        ]
    )
    results = results_frame({"pos": ["a.1"], "neg": ["n.1", "a.1"], "neg_clean": ["n.1", "z.1"]})
    questions = questions_frame(
        {"query_id": "pos"},
        {"query_id": "neg", "type": "negative", "is_negative": True},
        {"query_id": "neg_clean", "type": "negative", "is_negative": True},
    )
    per_query = retrieval_metrics(results, gold, questions)
    at1, at3 = values(per_query, "neg", 1), values(per_query, "neg", 3)
    assert at1["false_positive@k"] == 0.0  # n.1 is labelled only for the negative itself
    assert at3["false_positive@k"] == 1.0  # a.1 is gold for "pos"
    assert at3["hit@k"] == 0.0 and at3["doc_hit@k"] == 0.0
    for name in ("precision@k", "recall@k", "mrr@k", "ndcg@k", "map@k", "recall_any@k", "recall_all@k"):
        assert math.isnan(at3[name])
    assert values(per_query, "neg_clean", 3)["false_positive@k"] == 0.0
    assert math.isnan(values(per_query, "pos", 3)["false_positive@k"])

    aggregate = aggregate_metrics(per_query, questions, ("type",), n_boot=50)
    rate = aggregate[(aggregate["k"] == 3) & (aggregate["metric"] == "false_positive_rate@k")]
    assert dict(zip(rate["slice"], rate["value"])) == {"all": 0.5, "type=negative": 0.5}
    assert set(rate["n"]) == {2}
    assert "false_positive@k" not in set(aggregate["metric"])


def test_seed_001_negatives_count_chunks_of_documents_labelled_relevant() -> None:
    """Seed 001 labels documents (gold_doc_ids), not chunks: at chunk level a negative question's false positive is
    a retrieved chunk of any document labelled relevant for some question."""
    gold = gold_frame([("pos", "a.1", 1, -1, "gold_doc_ids"), ("pos", "a.2", 1, -1, "gold_doc_ids")])
    results = results_frame({"pos": ["a.1"], "neg": ["n.1", "a.2", "z.1"], "neg_clean": ["n.1", "z.1"]})
    questions = questions_frame(
        {"query_id": "pos"},
        {"query_id": "neg", "type": "negative", "is_negative": True},
        {"query_id": "neg_clean", "type": "negative", "is_negative": True},
    )
    per_query = retrieval_metrics(results, gold, questions, ks=(1, 2, 3))
    # neg: rank 1 is n.1 (unlabelled document n), rank 2 is a.2 (document a is gold for "pos").
    assert [values(per_query, "neg", k)["false_positive@k"] for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert [values(per_query, "neg_clean", k)["false_positive@k"] for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
    rate = aggregate_metrics(per_query, questions, (), n_boot=50)
    rate = rate[rate["metric"] == "false_positive_rate@k"]
    assert dict(zip(rate["k"], rate["value"])) == {1: 0.0, 2: 0.5, 3: 0.5}
    # At document level the document itself is the labelled item, as before.
    doc_level = retrieval_metrics(results, gold, questions, ks=(1, 2), level="doc")
    assert [values(doc_level, "neg", k)["false_positive@k"] for k in (1, 2)] == [0.0, 1.0]


def support_case(groups: list[list[int]] | None) -> pd.DataFrame:
    """Supports 0 (two chunks: s0.1, s0.2), 1 (s1.1), 2 (s2.1); each query retrieves a different subset."""
    gold_rows = []
    for q in ("none", "only0", "only0_other_chunk", "zero_and_one", "only2", "all"):
        gold_rows += [
            (q, "s0.1", 1, 0, "gold_supports"),
            (q, "s0.2", 1, 0, "gold_supports"),
            (q, "s1.1", 1, 1, "gold_supports"),
            (q, "s2.1", 1, 2, "gold_supports"),
        ]
    lists = {
        "none": ["x.1"],
        "only0": ["s0.1", "x.1"],
        "only0_other_chunk": ["x.1", "s0.2"],
        "zero_and_one": ["s1.1", "x.1", "s0.1"],
        "only2": ["s2.1"],
        "all": ["s2.1", "s0.2", "s1.1"],
    }
    questions = questions_frame(*({"query_id": q, "required_support_groups": groups} for q in lists))
    return retrieval_metrics(results_frame(lists), gold_frame(gold_rows), questions, ks=(1, 2, 3))


def test_recall_any_and_recall_all_over_required_support_groups() -> None:
    """[[0, 1], [2]] means (support 0 AND support 1) OR support 2 (seed 002)."""
    per_query = support_case([[0, 1], [2]])
    expected = {
        "none": (0.0, 0.0),
        "only0": (1.0, 0.0),
        "only0_other_chunk": (1.0, 0.0),
        "zero_and_one": (1.0, 1.0),
        "only2": (1.0, 1.0),
        "all": (1.0, 1.0),
    }
    for q, (any_hit, all_hit) in expected.items():
        at3 = values(per_query, q, 3)
        assert (at3["recall_any@k"], at3["recall_all@k"]) == (any_hit, all_hit), q
    # The cut matters: support 0 of "zero_and_one" only arrives at position 3.
    assert values(per_query, "zero_and_one", 1)["recall_all@k"] == 0.0


def test_without_groups_recall_all_needs_every_support() -> None:
    per_query = support_case(None)
    assert values(per_query, "only2", 3)["recall_all@k"] == 0.0
    assert values(per_query, "zero_and_one", 3)["recall_all@k"] == 0.0
    assert values(per_query, "all", 3)["recall_all@k"] == 1.0
    assert values(per_query, "all", 2)["recall_all@k"] == 0.0
    assert values(per_query, "only0_other_chunk", 3)["recall_any@k"] == 1.0


def test_a_group_naming_an_unresolved_support_is_never_complete() -> None:
    per_query = support_case([[0, 7]])
    assert values(per_query, "all", 3)["recall_all@k"] == 0.0
    assert values(per_query, "all", 3)["recall_any@k"] == 1.0


def test_repeated_ids_count_once_and_take_no_slot() -> None:
    per_query = retrieval_metrics(
        results_frame({"q": ["a.1", "a.1", "b.1", "a.1"]}),
        gold_frame([("q", "a.1", 1, -1, "gold_chunk_ids"), ("q", "b.1", 1, -1, "gold_chunk_ids")]),
        questions_frame({"query_id": "q"}),
        ks=(2, 5),
    )
    at2 = values(per_query, "q", 2)
    assert at2["precision@k"] == 1.0 and at2["recall@k"] == 1.0 and at2["ndcg@k"] == pytest.approx(1.0)
    assert values(per_query, "q", 5)["precision@k"] == pytest.approx(2 / 5)


def test_doc_level_lists_each_document_once_at_its_best_rank_with_its_highest_grade() -> None:
    gold = gold_frame([("q", "d.1", 1, -1, "qrels"), ("q", "d.2", 3, -1, "qrels"), ("q", "e.1", 1, -1, "qrels")])
    results = results_frame({"q": ["x.1", "d.5", "x.2", "d.1", "e.3"]})
    per_query = retrieval_metrics(results, gold, questions_frame({"query_id": "q"}), ks=(2,), level="doc")
    at2 = values(per_query, "q", 2)
    # Doc list: x, d, e; d carries grade 3.
    ideal = 3 / math.log2(2) + 1 / math.log2(3)
    assert at2["ndcg@k"] == pytest.approx((3 / math.log2(3)) / ideal)
    assert at2["precision@k"] == 0.5
    assert at2["recall@k"] == 0.5
    assert at2["mrr@k"] == 0.5


def test_queries_without_results_score_zero_and_rank_order_not_row_order_counts() -> None:
    gold = gold_frame([("q1", "a.1", 1, -1, "gold_chunk_ids"), ("q2", "b.1", 1, -1, "gold_chunk_ids")])
    results = results_frame({"q1": ["x.1", "y.1", "a.1"]})
    results["rank"] = [10, 20, 30]  # gaps: positions, not rank values, are what the cut counts
    results = results.iloc[::-1].reset_index(drop=True)
    per_query = retrieval_metrics(results, gold, questions_frame({"query_id": "q1"}, {"query_id": "q2"}))
    assert values(per_query, "q1", 3)["mrr@k"] == pytest.approx(1 / 3)
    assert values(per_query, "q1", 1)["hit@k"] == 0.0
    q2 = values(per_query, "q2", 20)
    assert [name for name in METRICS if q2[name] == 0.0] == list(METRICS[:7])
    # No anchor supports (gold_chunk_ids only) and not negative: the remaining three are undefined.
    assert all(math.isnan(q2[name]) for name in METRICS[7:])


def test_output_is_a_complete_long_table() -> None:
    per_query = retrieval_metrics(
        pd.concat([results_frame({"q": ["a.1"]}), results_frame({"q": ["b.1"]}, retriever="dense")]),
        gold_frame([("q", "a.1", 1, -1, "gold_chunk_ids")]),
        questions_frame({"query_id": "q"}, {"query_id": "r"}),
        ks=(10, 1, 10),
    )
    assert tuple(per_query.columns) == PER_QUERY_COLUMNS
    assert len(per_query) == 2 * 2 * 2 * len(METRICS)
    assert sorted(per_query["k"].unique()) == [1, 10]
    assert per_query["k"].dtype == np.int64 and per_query["value"].dtype == np.float64
    assert list(per_query["metric"].iloc[: len(METRICS)]) == list(METRICS)
    assert values(per_query, "q", 1, "dense")["hit@k"] == 0.0
    assert values(per_query, "q", 1, "bm25")["hit@k"] == 1.0


def test_scope_miss_when_no_gold_path_lies_under_the_searched_folders() -> None:
    chunks = pd.DataFrame(
        {
            "chunk_id": ["lc.1", "lc.2", "h.1"],
            "rel_path": ["Software/LeetCode Tips.md", "Software/LeetCode Tips.md", "Health/Sleep.md"],
        }
    )
    gold = gold_frame(
        [
            ("in", "lc.1", 1, 0, "gold_supports"),
            ("out", "lc.2", 1, 0, "gold_supports"),
            ("prefix_only", "lc.1", 1, 0, "gold_supports"),
            ("root", "h.1", 1, -1, "gold_doc_ids"),
            ("nothing_searched", "h.1", 1, 0, "gold_supports"),
            ("unscoped", "h.1", 1, 0, "gold_supports"),
        ]
    )
    folder_filter = {
        "in": ["Health", "Software/"],
        "out": ["Health"],
        "prefix_only": ["Soft"],
        "root": [""],
        "nothing_searched": [],
        "neg": ["Health"],
    }
    questions = questions_frame(
        *({"query_id": q} for q in ("in", "out", "prefix_only", "root", "nothing_searched", "unscoped")),
        {"query_id": "neg", "is_negative": True},
    )
    per_query = retrieval_metrics(
        results_frame({"in": ["lc.1"]}), gold, questions, ks=(1, 5), folder_filter=folder_filter, chunks=chunks
    )
    miss = per_query[(per_query["metric"] == "scope_miss") & (per_query["k"] == 5)].set_index("query_id")["value"]
    assert miss[["in", "out", "prefix_only", "root", "nothing_searched"]].tolist() == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert math.isnan(miss["unscoped"]) and math.isnan(miss["neg"])
    aggregate = aggregate_metrics(per_query, questions, (), n_boot=50)
    rate = aggregate[aggregate["metric"] == "scope_miss_rate"]
    assert rate["value"].tolist() == [pytest.approx(3 / 5)] * 2 and rate["n"].tolist() == [5, 5]
    assert "scope_miss" not in set(retrieval_metrics(results_frame({"in": ["lc.1"]}), gold, questions)["metric"])


def test_bad_inputs_are_reported_all_at_once() -> None:
    results = results_frame({"q": ["a.1", "b.1", "c.1"]})
    results.loc[1, "rank"] = 0
    results.loc[2, "rank"] = 1
    results = results.drop(columns=["doc_id"])
    gold = gold_frame([("q", "a.1", 1, -1, "gold_chunk_ids"), ("q", "b.1", 0, -1, "wiki")])
    gold["query_id"] = gold["query_id"].astype(object)
    gold.loc[0, "query_id"] = 7
    questions = questions_frame({"query_id": "q", "required_support_groups": [[0], []]}, {"query_id": "q"})
    with pytest.raises(InputError) as raised:
        retrieval_metrics(results, gold, questions, folder_filter={"q": "Software"})
    assert set(raised.value.problems) == {
        InputProblem("results", None, "doc_id", "missing column"),
        InputProblem("results", 1, "rank", "must be >= 1, got 0"),
        InputProblem("results", 2, "rank", "repeats a rank of this retriever/query, got 1"),
        InputProblem("gold", 0, "query_id", "must be a string, got 7"),
        InputProblem("gold", 1, "grade", "must be >= 1, got 0"),
        InputProblem(
            "gold",
            1,
            "source",
            "must be one of gold_supports, gold_chunk_ids, source_map, gold_doc_ids, qrels, got 'wiki'",
        ),
        InputProblem("questions", 1, "query_id", "repeats an earlier query_id, got 'q'"),
        InputProblem(
            "questions",
            0,
            "required_support_groups",
            "must be null or a non-empty list of non-empty lists of support indices, got [[0], []]",
        ),
        InputProblem("chunks", None, None, "a chunks table is required with a folder filter"),
        InputProblem("folder_filter", None, "q", "must be a list of folders, got 'Software'"),
    }


@pytest.mark.parametrize("ks", [(), (0, 5), (2.5,)])
def test_cut_offs_must_be_positive_integers(ks: tuple) -> None:
    with pytest.raises(ValueError, match="ks must be positive integers"):
        retrieval_metrics(results_frame({}), gold_frame([]), questions_frame({"query_id": "q"}), ks=ks)


def test_cranfield_sized_run_is_scored_well_under_a_second() -> None:
    rng = np.random.default_rng(7)
    query_ids = [f"q{i}" for i in range(225)]
    frames = []
    for retriever in ("bm25", "dense", "hybrid"):
        chunk = rng.integers(0, 1400, size=(225, 100))
        frames.append(
            pd.DataFrame(
                {
                    "query_id": np.repeat(query_ids, 100),
                    "retriever": retriever,
                    "rank": np.tile(np.arange(1, 101), 225),
                    "chunk_id": [f"c{c}" for c in chunk.ravel()],
                    "doc_id": [f"d{c // 2}" for c in chunk.ravel()],
                    "score": np.round(rng.random(22500), 2),
                }
            )
        )
    results = pd.concat(frames, ignore_index=True)
    gold_chunks = rng.integers(0, 1400, size=(225, 8))
    gold = pd.DataFrame(
        {
            "query_id": np.repeat(query_ids, 8),
            "chunk_id": [f"c{c}" for c in gold_chunks.ravel()],
            "doc_id": [f"d{c // 2}" for c in gold_chunks.ravel()],
            "grade": rng.integers(1, 4, size=225 * 8),
            "support_index": np.tile(np.arange(8), 225) % 3,
            "source": "gold_supports",
        }
    )
    questions = questions_frame(
        *({"query_id": q, "required_support_groups": [[0, 1], [2]] if i % 2 else None} for i, q in enumerate(query_ids))
    )
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        per_query = retrieval_metrics(results, gold, questions, ks=(1, 3, 5, 10, 20, 100))
        timings.append(time.perf_counter() - start)
    assert len(per_query) == 3 * 225 * 6 * len(METRICS)
    assert min(timings) < 1.0, timings
