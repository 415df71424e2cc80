"""Randomised runs scored by retrieval_metrics, by pytrec_eval (trec_eval) and by a naive per-query reference.

Every case mixes score ties, lists shorter than k, queries without results, repeated ids, graded and binary
judgements, multi-chunk supports, required support groups, negatives, doc-only and unlabelled questions. The cases
are scored together, each id prefixed by its case so that no two cases share a query, chunk or document: one call
then covers them all, and per-case means come back as the slices "case=<seed>".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.retrieval import retrieval_metrics

KS = (1, 3, 5, 10, 20)
N_CASES = 220
RETRIEVERS = ("bm25", "dense")
CHUNK_PRECISE = {"gold_supports", "gold_chunk_ids", "source_map"}


@dataclass
class Case:
    results: pd.DataFrame
    gold: pd.DataFrame
    questions: pd.DataFrame
    # Per query_id: "chunk" when ranks follow trec_eval's order of chunk ids, "doc" of doc ids, else "shuffled".
    order: dict[str, str]


def random_case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    case = f"s{seed}:"
    chunk_doc: dict[str, str] = {}
    for d in range(int(rng.integers(2, 7))):
        # Some ids hold a space, which the TREC writer must encode.
        doc = f"{case}notes/doc {d}.md" if rng.random() < 0.3 else f"{case}d{d}"
        for j in range(int(rng.integers(1, 5))):
            chunk_doc[f"{doc}#c{j}"] = doc
    for x in range(int(rng.integers(0, 4))):  # never labelled for anyone
        chunk_doc[f"{case}x{x}"] = f"{case}dx{x % 2}"
    chunk_ids = sorted(chunk_doc)
    labellable = [c for c in chunk_ids if not c.startswith(f"{case}x")]
    graded = rng.random() < 0.5

    def grade() -> int:
        return int(rng.integers(1, 4)) if graded else 1

    gold_rows, questions = [], []
    for i in range(int(rng.integers(1, 7))):
        qid = f"{case}q{i}"
        kinds = ["supports", "chunk_ids", "doc_only", "unlabelled", "negative"]
        kind = rng.choice(kinds, p=[0.35, 0.2, 0.2, 0.1, 0.15])
        groups = None
        if kind == "supports":
            n_sup = int(rng.integers(1, 4))
            for s in range(n_sup):
                for chunk in rng.choice(labellable, size=min(int(rng.integers(1, 3)), len(labellable)), replace=False):
                    gold_rows.append((qid, chunk, chunk_doc[chunk], grade(), s, "gold_supports"))
            if rng.random() < 0.5:  # index n_sup never resolves: a group needing it can never be complete
                groups = [
                    sorted(int(s) for s in rng.choice(n_sup + 1, size=int(rng.integers(1, 3)), replace=False))
                    for _ in range(int(rng.integers(1, 4)))
                ]
        elif kind == "chunk_ids":
            for chunk in rng.choice(labellable, size=min(int(rng.integers(1, 4)), len(labellable)), replace=False):
                gold_rows.append((qid, chunk, chunk_doc[chunk], grade(), -1, "gold_chunk_ids"))
        if kind in ("supports", "chunk_ids", "doc_only") and (kind == "doc_only" or rng.random() < 0.4):
            source = str(rng.choice(["gold_doc_ids", "qrels"]))
            for doc in rng.choice(sorted({chunk_doc[c] for c in labellable}), size=int(rng.integers(1, 3))):
                g = grade()
                gold_rows += [(qid, c, doc, g, -1, source) for c in chunk_ids if chunk_doc[c] == doc]
        questions.append((qid, str(kind), kind == "negative", groups))

    order = str(rng.choice(["chunk", "doc", "shuffled"]))
    result_rows = []
    for retriever in RETRIEVERS:
        for qid, *_ in questions:
            if rng.random() < 0.15:
                continue  # no results at all for this query
            n = int(rng.integers(0, 26))
            chunks = rng.choice(chunk_ids, size=n)  # with replacement: repeated ids
            scores = rng.choice([0.1, 0.2, 0.3, 0.4, 0.5], size=n)  # few distinct scores: ties
            rows = [(c, chunk_doc[c], float(s)) for c, s in zip(chunks, scores)]
            if order == "chunk":  # trec_eval: score descending, then id descending
                rows.sort(key=lambda r: (r[2], r[0]), reverse=True)
            elif order == "doc":
                rows.sort(key=lambda r: (r[2], r[1], r[0]), reverse=True)
            else:
                rows = [rows[j] for j in rng.permutation(n)]
            result_rows += [(qid, retriever, rank, c, d, s) for rank, (c, d, s) in enumerate(rows, start=1)]
    results = pd.DataFrame(result_rows, columns=["query_id", "retriever", "rank", "chunk_id", "doc_id", "score"])
    results = results.astype({"rank": "int64", "score": "float64"})
    results = results.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # ranks, not row order, count
    gold = pd.DataFrame(gold_rows, columns=["query_id", "chunk_id", "doc_id", "grade", "support_index", "source"])
    gold = gold.astype({"grade": "int64", "support_index": "int64"})
    frame = pd.DataFrame(questions, columns=["query_id", "type", "is_negative", "required_support_groups"])
    frame["case"] = seed
    return Case(results, gold, frame, dict.fromkeys(frame["query_id"], order))


def combine(cases: list[Case]) -> Case:
    return Case(
        pd.concat([c.results for c in cases], ignore_index=True),
        pd.concat([c.gold for c in cases], ignore_index=True),
        pd.concat([c.questions for c in cases], ignore_index=True),
        {q: o for c in cases for q, o in c.order.items()},
    )


def naive_lists(case: Case, level: str) -> dict[tuple[str, str], list[tuple[str, str, float]]]:
    """Per (retriever, query_id): (item, doc_id, score) in rank order, each item at its first occurrence."""
    lists: dict[tuple[str, str], list[tuple[str, str, float]]] = {}
    seen: set[tuple[str, str, str]] = set()
    for row in case.results.sort_values(["retriever", "query_id", "rank"]).itertuples():
        item = row.chunk_id if level == "chunk" else row.doc_id
        key = (row.retriever, row.query_id)
        if key + (item,) not in seen:
            seen.add(key + (item,))
            lists.setdefault(key, []).append((item, row.doc_id, row.score))
    return lists


def naive_qrels(case: Case, level: str) -> dict[str, dict[str, int]]:
    negatives = set(case.questions.loc[case.questions["is_negative"], "query_id"])
    qrels: dict[str, dict[str, int]] = {}
    for row in case.gold.itertuples():
        if row.query_id in negatives or (level == "chunk" and row.source not in CHUNK_PRECISE):
            continue
        item = row.chunk_id if level == "chunk" else row.doc_id
        judged = qrels.setdefault(row.query_id, {})
        judged[item] = max(judged.get(item, 0), int(row.grade))
    return qrels


def naive_metrics(case: Case, level: str) -> dict[tuple[str, str, int, str], float]:
    """Every metric of every (retriever, question, k), straight from the definitions in docs/metrics.md."""
    qrels = naive_qrels(case, level)
    lists = naive_lists(case, level)
    labelled_anywhere = {item for judged in qrels.values() for item in judged}
    negatives = set(case.questions.loc[case.questions["is_negative"], "query_id"])
    # At chunk level a chunk of a document labelled relevant as a whole is a negative's false positive too.
    labelled_docs = {row.doc_id for row in case.gold.itertuples()
                     if level == "chunk" and row.query_id not in negatives and row.source in ("gold_doc_ids", "qrels")}
    gold_by_query: dict[str, list] = {}
    for row in case.gold.itertuples():
        gold_by_query.setdefault(row.query_id, []).append(row)
    out = {}
    for retriever in RETRIEVERS:
        for question in case.questions.itertuples():
            ranked = lists.get((retriever, question.query_id), [])
            own = [] if question.is_negative else gold_by_query.get(question.query_id, [])
            for k in KS:
                values = naive_question(level, question, qrels.get(question.query_id, {}), own, ranked[:k], k)
                if question.is_negative:
                    values["false_positive@k"] = float(
                        any(t[0] in labelled_anywhere or t[1] in labelled_docs for t in ranked[:k]))
                out.update({(retriever, question.query_id, k, name): v for name, v in values.items()})
    return out


def naive_question(level: str, question, rel: dict[str, int], own: list, top: list, k: int) -> dict[str, float]:
    names = ["hit@k", "doc_hit@k", "precision@k", "recall@k", "mrr@k", "ndcg@k", "map@k"]
    values = dict.fromkeys(names + ["recall_any@k", "recall_all@k", "false_positive@k"], math.nan)
    items = [t[0] for t in top]
    gold_docs = {row.doc_id for row in own}
    if question.is_negative:
        values["hit@k"] = values["doc_hit@k"] = 0.0
    if gold_docs:
        values["doc_hit@k"] = float(any(t[1] in gold_docs for t in top))
        values["hit@k"] = float(any(i in rel for i in items))
    if not rel:
        return values
    found = [i for i in items if i in rel]
    values["precision@k"] = len(found) / k
    values["recall@k"] = len(found) / len(rel)
    first = next((p for p, i in enumerate(items, start=1) if i in rel), None)
    values["mrr@k"] = 0.0 if first is None else 1.0 / first
    dcg = sum(rel.get(i, 0) / math.log2(p + 1) for p, i in enumerate(items, start=1))
    ideal = sorted(rel.values(), reverse=True)[:k]
    values["ndcg@k"] = dcg / sum(g / math.log2(p + 1) for p, g in enumerate(ideal, start=1))
    hits_so_far, ap = 0, 0.0
    for p, i in enumerate(items, start=1):
        if i in rel:
            hits_so_far += 1
            ap += hits_so_far / p
    values["map@k"] = ap / len(rel)
    supports = [r for r in own if r.source in CHUNK_PRECISE and r.support_index >= 0]
    if supports:
        hit = {r.support_index for r in supports if (r.chunk_id if level == "chunk" else r.doc_id) in items}
        groups = question.required_support_groups or [sorted({r.support_index for r in supports})]
        values["recall_any@k"] = float(bool(hit))
        values["recall_all@k"] = float(any(set(g) <= hit for g in groups))
    return values


def pytrec_per_query(case: Case, level: str, retriever: str) -> dict[str, dict[str, float]]:
    """pytrec_eval's P, recall, ndcg_cut, map_cut and success at KS, and recip_rank of the run cut at each k.

    When the ranks already follow trec_eval's order at this level, trec_eval gets the retriever's own (tied)
    scores; otherwise the rank-derived scores the TREC writer emits.
    """
    qrels = {q: judged for q, judged in naive_qrels(case, level).items() if judged}
    cut = ",".join(map(str, KS))
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {f"P.{cut}", f"recall.{cut}", f"ndcg_cut.{cut}", f"map_cut.{cut}", f"success.{cut}"}
    )
    mrr_evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    every_list = naive_lists(case, level)
    run = {}
    for q in qrels:
        ranked = every_list.get((retriever, q), [])
        if case.order[q] == level:
            run[q] = {item: score for item, _, score in ranked}
        else:
            run[q] = {item: float(len(ranked) - p) for p, (item, _, _) in enumerate(ranked)}
    measured = evaluator.evaluate(run)
    # trec_eval's own order: score descending, then id descending.
    in_trec_order = {q: sorted(s.items(), key=lambda kv: (kv[1], kv[0]), reverse=True) for q, s in run.items()}
    for k in KS:
        truncated = {q: dict(pairs[:k]) for q, pairs in in_trec_order.items()}
        for q, values in mrr_evaluator.evaluate(truncated).items():
            measured[q][f"mrr_{k}"] = values["recip_rank"]
    return measured


OURS_TO_TREC = {
    "precision@k": "P_{k}",
    "recall@k": "recall_{k}",
    "ndcg@k": "ndcg_cut_{k}",
    "map@k": "map_cut_{k}",
    "hit@k": "success_{k}",
    "mrr@k": "mrr_{k}",
}


def by_key(per_query: pd.DataFrame) -> dict[tuple[str, str, int, str], float]:
    return {
        (r, q, int(k), m): v
        for r, q, k, m, v in per_query[["retriever", "query_id", "k", "metric", "value"]].itertuples(index=False)
    }


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return [random_case(seed) for seed in range(N_CASES)]


@pytest.fixture(scope="module")
def together(cases: list[Case]) -> Case:
    return combine(cases)


@pytest.fixture(scope="module")
def scored(together: Case) -> dict[str, pd.DataFrame]:
    return {
        level: retrieval_metrics(together.results, together.gold, together.questions, ks=KS, level=level)
        for level in ("chunk", "doc")
    }


def test_the_random_cases_cover_the_hard_inputs(cases: list[Case]) -> None:
    ties = duplicates = short = empty = graded = 0
    for case in cases:
        r = case.results
        keys = ["retriever", "query_id"]
        ties += int(r.duplicated(keys + ["score"]).any())
        duplicates += int(r.duplicated(keys + ["chunk_id"]).any())
        sizes = r.groupby(keys).size()
        short += int((sizes < 20).any())
        empty += int(len(sizes) < len(RETRIEVERS) * len(case.questions))
        graded += int((case.gold["grade"] > 1).any())
    assert min(ties, duplicates, short, empty, graded) >= 50, (ties, duplicates, short, empty, graded)
    assert {o for c in cases for o in c.order.values()} == {"chunk", "doc", "shuffled"}


@pytest.mark.parametrize("level", ["chunk", "doc"])
def test_per_query_values_agree_with_trec_eval_and_the_definitions(
    together: Case, scored: dict[str, pd.DataFrame], level: str
) -> None:
    per_query = scored[level]
    assert len(per_query) == len(RETRIEVERS) * len(together.questions) * len(KS) * 10
    ours = by_key(per_query)
    for key, expected in naive_metrics(together, level).items():
        assert same(ours[key], expected), (key, ours[key], expected)
    compared = 0
    for retriever in RETRIEVERS:
        for qid, measured in pytrec_per_query(together, level, retriever).items():
            for name, trec_name in OURS_TO_TREC.items():
                for k in KS:
                    got, expected = ours[(retriever, qid, k, name)], measured[trec_name.format(k=k)]
                    assert abs(got - expected) <= 1e-9, (retriever, qid, k, name, got, expected)
                    compared += 1
    assert compared > 10_000


@pytest.mark.parametrize("level", ["chunk", "doc"])
def test_aggregate_means_agree_with_trec_eval(together: Case, scored: dict[str, pd.DataFrame], level: str) -> None:
    """trec_eval averages over the queries it has judgements for: so do we, per case and over all cases."""
    per_query = scored[level]
    labelled = sorted(naive_qrels(together, level))
    aggregate = aggregate_metrics(per_query[per_query["query_id"].isin(labelled)], together.questions, ("case",), 20)
    means = {
        (r, k, sl, m): (v, n)
        for r, k, sl, m, v, n in aggregate[["retriever", "k", "slice", "metric", "value", "n"]].itertuples(index=False)
    }
    labelled_by_slice = {"all": labelled}
    for q in labelled:
        labelled_by_slice.setdefault(f"case={q[1:q.index(':')]}", []).append(q)
    assert len(labelled_by_slice) > 150
    for retriever in RETRIEVERS:
        measured = pytrec_per_query(together, level, retriever)
        for name, trec_name in OURS_TO_TREC.items():
            for k in KS:
                for slice_name, queries in labelled_by_slice.items():
                    value, n = means[(retriever, k, slice_name, name)]
                    expected = np.mean([measured[q][trec_name.format(k=k)] for q in queries])
                    assert n == len(queries)
                    assert abs(value - expected) <= 1e-9, (retriever, k, slice_name, name, value, expected)
