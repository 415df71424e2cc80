"""TREC run and qrels export: format, tie order, id encoding, and a round trip through pytrec_eval."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pytest
import pytrec_eval

from rag_eval_assets.metrics.retrieval import retrieval_metrics
from rag_eval_assets.metrics.trec import trec_id, write_trec_qrels, write_trec_run
from rag_eval_assets_tests.test_metrics_retrieval_trec_eval import KS, by_key, combine, random_case

COLUMNS = ["query_id", "retriever", "rank", "chunk_id", "doc_id", "score"]
GOLD_COLUMNS = ["query_id", "chunk_id", "doc_id", "grade", "support_index", "source"]


def tied_results() -> pd.DataFrame:
    """Three chunks tied at 0.9, ranked a, b, c by the retriever; trec_eval alone would order them c, b, a."""
    rows = [
        ("q1", "bm25", 1, "a", "D1", 0.9),
        ("q1", "bm25", 2, "b", "D2", 0.9),
        ("q1", "bm25", 3, "c", "D1", 0.9),
        ("q1", "bm25", 4, "a", "D1", 0.1),
        ("q2", "bm25", 1, "z", "D3", 2.5),
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def tied_gold() -> pd.DataFrame:
    rows = [
        ("q1", "a", "D1", 1, -1, "gold_chunk_ids"),
        ("q1", "c", "D1", 2, -1, "gold_doc_ids"),
        ("q1", "a", "D1", 3, -1, "gold_doc_ids"),
        ("q2", "y", "D3", 1, 0, "gold_supports"),
    ]
    return pd.DataFrame(rows, columns=GOLD_COLUMNS)


def test_run_lines_keep_our_rank_order_with_rank_derived_scores(tmp_path: Path) -> None:
    write_trec_run(tied_results(), tmp_path / "run.txt", "bm25-v1")
    assert (tmp_path / "run.txt").read_text().splitlines() == [
        "q1 Q0 a 1 3 bm25-v1",
        "q1 Q0 b 2 2 bm25-v1",
        "q1 Q0 c 3 1 bm25-v1",
        "q2 Q0 z 1 1 bm25-v1",
    ]
    write_trec_run(tied_results(), tmp_path / "docs.txt", "bm25-v1", level="doc")
    assert (tmp_path / "docs.txt").read_text().splitlines() == [
        "q1 Q0 D1 1 2 bm25-v1",
        "q1 Q0 D2 2 1 bm25-v1",
        "q2 Q0 D3 1 1 bm25-v1",
    ]


def test_qrels_hold_the_judgements_of_each_level(tmp_path: Path) -> None:
    write_trec_qrels(tied_gold(), tmp_path / "chunk.qrels")
    assert (tmp_path / "chunk.qrels").read_text().splitlines() == ["q1 0 a 1", "q2 0 y 1"]
    write_trec_qrels(tied_gold(), tmp_path / "doc.qrels", level="doc")
    assert (tmp_path / "doc.qrels").read_text().splitlines() == ["q1 0 D1 3", "q2 0 D3 1"]


def test_trec_eval_on_the_written_run_sees_our_tie_order_not_its_own(tmp_path: Path) -> None:
    results, gold = tied_results(), tied_gold()
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "is_negative": False, "required_support_groups": None})
    ours = retrieval_metrics(results, gold, questions, ks=(1,))
    ours_p1 = ours[(ours["query_id"] == "q1") & (ours["metric"] == "precision@k")]["value"].item()
    assert ours_p1 == 1.0  # "a" is ranked first

    evaluator = pytrec_eval.RelevanceEvaluator({"q1": {"a": 1}}, {"P.1"})
    raw_scores = {"q1": {"a": 0.9, "b": 0.9, "c": 0.9}}
    assert evaluator.evaluate(raw_scores)["q1"]["P_1"] == 0.0  # ties broken by id descending: "c" first

    write_trec_run(results, tmp_path / "run.txt", "bm25")
    with open(tmp_path / "run.txt") as lines:
        assert evaluator.evaluate(pytrec_eval.parse_run(lines))["q1"]["P_1"] == ours_p1


def test_ids_with_whitespace_or_percent_are_encoded_reversibly(tmp_path: Path) -> None:
    ids = ["Software/LeetCode Tips.md", "100%\tdone", "naïve\u3000note", "plain"]
    assert [trec_id(i) for i in ids] == ["Software/LeetCode%20Tips.md", "100%25%09done", "naïve%E3%80%80note", "plain"]
    assert [unquote(trec_id(i)) for i in ids] == ids
    results = pd.DataFrame([("q 1", "bm25", 1, "c 1", "My Notes.md", 1.0)], columns=COLUMNS)
    write_trec_run(results, tmp_path / "run.txt", "bm25", level="doc")
    assert (tmp_path / "run.txt").read_text() == "q%201 Q0 My%20Notes.md 1 1 bm25\n"


def test_a_run_file_holds_one_retriever_and_a_plain_run_name(tmp_path: Path) -> None:
    both = pd.concat([tied_results(), tied_results().assign(retriever="dense")])
    with pytest.raises(ValueError, match="one retriever"):
        write_trec_run(both, tmp_path / "run.txt", "mixed")
    with pytest.raises(ValueError, match="run_name"):
        write_trec_run(tied_results(), tmp_path / "run.txt", "bm 25")


@pytest.mark.parametrize("level", ["chunk", "doc"])
def test_round_trip_through_files_gives_the_same_metrics(tmp_path: Path, level: str) -> None:
    """Random cases with ties, repeats and graded gold, written as run + qrels and scored by pytrec_eval."""
    case = combine([random_case(seed) for seed in range(1000, 1060)])
    ours = retrieval_metrics(case.results, case.gold, case.questions, ks=KS, level=level)
    ours = by_key(ours.assign(query_id=ours["query_id"].map(trec_id)))
    write_trec_qrels(case.gold, tmp_path / "qrels", level)  # the random negatives carry no gold rows
    with open(tmp_path / "qrels") as lines:
        qrels = pytrec_eval.parse_qrel(lines)
    cut = ",".join(map(str, KS))
    measures = {"precision@k": "P", "recall@k": "recall", "ndcg@k": "ndcg_cut", "map@k": "map_cut", "hit@k": "success"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"{m}.{cut}" for m in measures.values()})
    compared = 0
    for retriever, results in case.results.groupby("retriever"):
        write_trec_run(results, tmp_path / f"{retriever}.run", retriever, level)
        with open(tmp_path / f"{retriever}.run") as lines:
            run = pytrec_eval.parse_run(lines)
        # trec_eval scores the queries it has both judgements and results for; ours are 0 for the rest.
        for qid, measured in evaluator.evaluate({q: run.get(q, {}) for q in qrels}).items():
            for name, trec_name in measures.items():
                for k in KS:
                    expected = measured[f"{trec_name}_{k}"]
                    assert ours[(retriever, qid, k, name)] == pytest.approx(expected, abs=1e-9)
                    compared += 1
    assert compared > 5_000
