"""Per-query retrieval metrics (seeds 001, 002, 004), computed the way trec_eval computes them.

Every cut-off metric works on one ranked list per (retriever, query): the result rows in `rank` order with each id
kept at its first (best) occurrence only, so a repeated chunk (or, at doc level, every later chunk of an already
listed document) neither counts twice nor takes a slot. trec_eval refuses duplicate ids; this is the list it would
accept, and `trec.write_trec_run` writes exactly this list. The rules are tabulated in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from rag_eval_assets.errors import InputError
from rag_eval_assets.metrics.ranked_lists import CHUNK_PRECISE_SOURCES, DOC_SOURCES, LEVELS, ranked_lists, relevance_judgements
from rag_eval_assets.metrics.retrieval_inputs import GOLD_FIELDS, frame_problems, input_problems

METRICS = (
    "hit@k",
    "doc_hit@k",
    "precision@k",
    "recall@k",
    "mrr@k",
    "ndcg@k",
    "map@k",
    "recall_any@k",
    "recall_all@k",
    "false_positive@k",
)
SCOPE_MISS = "scope_miss"
PER_QUERY_COLUMNS = ("query_id", "retriever", "k", "metric", "value")


def retrieval_metrics(
    results: pd.DataFrame,
    gold: pd.DataFrame,
    questions: pd.DataFrame,
    ks: Iterable[int] = (1, 3, 5, 10, 20),
    level: str = "chunk",
    folder_filter: Mapping[str, Sequence[str]] | None = None,
    chunks: pd.DataFrame | None = None,
    scored_on: pd.DataFrame | None = None,
    retrievers: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Long table (query_id, retriever, k, metric, value): every metric of METRICS for every question of `questions`,
    every retriever of `retrievers` (default: those in `results`) and every k, NaN where the metric is undefined for
    that question.

    `scored_on` (gold rows, default `gold`) decides which metrics each question is scored on, `gold` which retrieved
    items are relevant. A service under test is judged on the gold resolved against the chunks it returned but scored
    on the questions the corpus gold labels: a question whose gold it never returned is a miss (0), never left out.

    `scope_miss` rows are added (repeated for each k) when `folder_filter` maps query ids to the folders searched;
    `chunks` (chunk_id, rel_path) then resolves gold chunk ids to paths. Result and gold rows of query ids absent from
    `questions` are ignored, so a dev subset is evaluated by passing only its questions.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    cuts = _check_ks(ks)
    problems = input_problems(results, gold, questions, folder_filter, chunks)
    if scored_on is not None:
        problems += frame_problems(scored_on, "scored_on", GOLD_FIELDS)
    if problems:
        raise InputError(problems)

    qids = pd.Index(questions["query_id"])
    negative = questions["is_negative"].to_numpy(dtype=bool)
    retrievers = pd.Index(sorted(results["retriever"].unique() if retrievers is None else set(retrievers)))
    nq, nr = len(qids), len(retrievers)
    n_groups = nq * nr
    # Group g = (retriever, question) = r * nq + q; per-question arrays are indexed through q_of_g.
    q_of_g = np.tile(np.arange(nq), nr)

    # Negative questions have no gold by definition: any row labelled for one is dropped, not trusted.
    gold = gold[gold["query_id"].isin(qids[~negative])]
    judged = relevance_judgements(gold, level)
    judged_q = _positions(qids, judged["query_id"])
    n_rel = np.bincount(judged_q, minlength=nq)
    supports = _supports(gold, level)
    labels = gold if scored_on is None else scored_on[scored_on["query_id"].isin(qids[~negative])]
    has_gold = np.bincount(_positions(qids, labels["query_id"]), minlength=nq) > 0
    labelled = np.bincount(_positions(qids, relevance_judgements(labels, level)["query_id"]), minlength=nq) > 0
    has_supports = np.bincount(_positions(qids, _supports(labels, level)["query_id"]), minlength=nq) > 0

    ranked = ranked_lists(results[results["query_id"].isin(qids) & results["retriever"].isin(retrievers)], level)
    ranked_q = _positions(qids, ranked["query_id"])
    g = _positions(retrievers, ranked["retriever"]) * nq + ranked_q
    pos = ranked["position"].to_numpy(dtype=np.int64)
    # Ids as integer codes over one shared vocabulary, so every (question, id) lookup below is an integer join.
    item_code, judged_code = _codes(ranked["item"], judged["item"])
    n_items = max(int(item_code.max(initial=-1)), int(judged_code.max(initial=-1))) + 1
    found = pd.Index(judged_q.astype(np.int64) * n_items + judged_code).get_indexer(
        ranked_q.astype(np.int64) * n_items + item_code
    )
    # found is -1 for an unjudged row: it picks the appended 0.
    grade = np.append(judged["grade"].to_numpy(dtype=float), 0.0)[found]
    rel = grade > 0
    if level == "doc":
        doc_rel = rel
    else:
        ranked_doc, gold_doc = _codes(ranked["doc_id"], gold["doc_id"])
        n_docs = max(int(ranked_doc.max(initial=-1)), int(gold_doc.max(initial=-1))) + 1
        gold_keys = _positions(qids, gold["query_id"]).astype(np.int64) * n_docs + gold_doc
        doc_rel = np.isin(ranked_q.astype(np.int64) * n_docs + ranked_doc, gold_keys)
    # A negative question should retrieve nothing anyone labelled relevant; such a hit is its false positive. At
    # chunk level a chunk of a document labelled relevant as a whole (seed 001 gold_doc_ids, qrels) counts too:
    # with doc-only labels no chunk id is labelled at all.
    labelled_hit = _member(item_code, judged_code, n_items)
    if level == "chunk":
        labelled_hit |= _member(ranked_doc, gold_doc[gold["source"].isin(DOC_SOURCES).to_numpy()], n_docs)
    false_pos = negative[ranked_q] & labelled_hit
    # ranked_lists keeps each group's rows together, in position order: a running count minus the count before
    # the group's first row is the count within the group.
    running = np.cumsum(rel)
    group_start = np.flatnonzero(pos == 1)
    before = (running - rel)[group_start]
    rel_so_far = running - np.repeat(before, np.diff(np.append(group_start, len(pos))))

    first_rel = _first_position(g, pos, rel, n_groups)
    first_doc = _first_position(g, pos, doc_rel, n_groups)
    first_fp = _first_position(g, pos, false_pos, n_groups)
    any_pos, all_pos = _support_positions(
        ranked.assign(g=g), supports, questions["required_support_groups"], qids, nr, n_groups
    )
    ideal = _ideal_dcg(judged, judged_q, nq, cuts)

    # Seed 001: with doc gold but no chunk-precise gold, hit@k is 0 (no relevant chunk can be found) while the
    # rank-based metrics are undefined; a negative question's hit@k and doc_hit@k are 0 by definition.
    defined = {
        "hit@k": negative | has_gold,
        "doc_hit@k": negative | has_gold,
        "precision@k": labelled,
        "recall@k": labelled,
        "mrr@k": labelled,
        "ndcg@k": labelled,
        "map@k": labelled,
        "recall_any@k": labelled & has_supports,
        "recall_all@k": labelled & has_supports,
        "false_positive@k": negative,
    }
    names = list(METRICS)
    scope = None
    if folder_filter is not None:
        names.append(SCOPE_MISS)
        scope = _scope_miss(gold, qids, folder_filter, chunks)[q_of_g]

    values = np.full((n_groups, len(cuts), len(names)), np.nan)
    n_rel_g = n_rel[q_of_g].astype(float)
    discount = 1.0 / np.log2(pos + 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j, k in enumerate(cuts):
            in_k = pos <= k
            hits = np.bincount(g, weights=(rel & in_k).astype(float), minlength=n_groups)
            dcg = np.bincount(g, weights=np.where(in_k, grade * discount, 0.0), minlength=n_groups)
            ap = np.bincount(g, weights=np.where(rel & in_k, rel_so_far / pos, 0.0), minlength=n_groups)
            computed = {
                "hit@k": first_rel <= k,
                "doc_hit@k": first_doc <= k,
                "precision@k": hits / k,
                "recall@k": hits / n_rel_g,
                "mrr@k": np.where(first_rel <= k, 1.0 / first_rel, 0.0),
                "ndcg@k": dcg / ideal[q_of_g, j],
                "map@k": ap / n_rel_g,
                "recall_any@k": any_pos <= k,
                "recall_all@k": all_pos <= k,
                "false_positive@k": first_fp <= k,
            }
            for m, name in enumerate(METRICS):
                # 0/0 only where `scored_on` labels a question `gold` does not: nothing relevant was retrieved.
                values[:, j, m] = np.where(defined[name][q_of_g], np.nan_to_num(computed[name], nan=0.0), np.nan)
            if scope is not None:
                values[:, j, -1] = scope

    n_cells = len(cuts) * len(names)
    # Id columns are taken from string arrays rather than built from Python objects: same values, less work.
    return pd.DataFrame(
        {
            "query_id": pd.array(qids, dtype="str").take(np.repeat(q_of_g, n_cells)),
            "retriever": pd.array(retrievers, dtype="str").take(np.repeat(np.arange(nr), nq * n_cells)),
            "k": np.tile(np.repeat(np.asarray(cuts, dtype=np.int64), len(names)), n_groups),
            "metric": pd.array(names, dtype="str").take(np.tile(np.arange(len(names)), n_groups * len(cuts))),
            "value": values.ravel(),
        }
    )


def _supports(gold: pd.DataFrame, level: str) -> pd.DataFrame:
    """The (query_id, item, support_index) rows of the chunk-precise supports, item at `level`."""
    item = "chunk_id" if level == "chunk" else "doc_id"
    supports = gold.loc[
        gold["source"].isin(CHUNK_PRECISE_SOURCES) & (gold["support_index"] >= 0),
        ["query_id", item, "support_index"],
    ].drop_duplicates()
    return supports.rename(columns={item: "item"})


def _codes(*columns: pd.Series) -> list[np.ndarray]:
    """Integer codes of the values of several columns over one shared vocabulary (equal values, equal codes)."""
    codes = pd.factorize(pd.concat([pd.Series(c.array) for c in columns], ignore_index=True))[0].astype(np.int64)
    return np.split(codes, np.cumsum([len(c) for c in columns])[:-1])


def _positions(index: pd.Index, values: pd.Series) -> np.ndarray:
    """index.get_indexer(values), looking each distinct value up once."""
    codes, distinct = pd.factorize(values)
    return index.get_indexer(distinct)[codes] if len(codes) else np.zeros(0, dtype=np.int64)


def _member(codes: np.ndarray, members: np.ndarray, n: int) -> np.ndarray:
    table = np.zeros(n, dtype=bool)
    table[members] = True
    return table[codes]


def _first_position(g: np.ndarray, pos: np.ndarray, mask: np.ndarray, n_groups: int) -> np.ndarray:
    first = np.full(n_groups, np.inf)
    np.minimum.at(first, g[mask], pos[mask])
    return first


def _ideal_dcg(judged: pd.DataFrame, judged_q: np.ndarray, nq: int, cuts: list[int]) -> np.ndarray:
    """trec_eval's ideal DCG per (question, cut): the question's grades sorted descending, discounted by rank."""
    order = np.lexsort((-judged["grade"].to_numpy(), judged_q))
    q = judged_q[order]
    grades = judged["grade"].to_numpy(dtype=float)[order]
    ideal_pos = pd.Series(q).groupby(q).cumcount().to_numpy() + 1
    gains = grades / np.log2(ideal_pos + 1.0)
    ideal = np.empty((nq, len(cuts)))
    for j, k in enumerate(cuts):
        ideal[:, j] = np.bincount(q, weights=np.where(ideal_pos <= k, gains, 0.0), minlength=nq)
    return ideal


def _support_positions(
    ranked: pd.DataFrame,
    supports: pd.DataFrame,
    required_groups: pd.Series,
    qids: pd.Index,
    nr: int,
    n_groups: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per group g, the cut-off at which recall_any (some support hit) and recall_all (every support of some required
    group hit) first become 1; inf when never.

    A support is hit at the position of its best-ranked resolved item. Without required_support_groups the question
    has one group holding every support that resolved to at least one item.
    """
    nq = len(qids)
    if supports.empty:
        return np.full(n_groups, np.inf), np.full(n_groups, np.inf)
    hits = ranked[["g", "query_id", "item", "position"]].merge(supports, on=["query_id", "item"])
    support_pos = hits.groupby(["g", "support_index"])["position"].min()
    any_pos = np.full(n_groups, np.inf)
    np.minimum.at(any_pos, support_pos.index.get_level_values("g").to_numpy(), support_pos.to_numpy(dtype=float))

    resolved = supports.groupby("query_id")["support_index"].unique()
    member_q, member_group, member_support = [], [], []
    for q, query_id in enumerate(qids):
        if query_id not in resolved.index:
            continue
        groups = required_groups.iloc[q]
        if groups is None:
            groups = [sorted(int(s) for s in resolved[query_id])]
        for group_no, group in enumerate(groups):
            for support in group:
                member_q.append(q)
                member_group.append(group_no)
                member_support.append(int(support))
    q_arr = np.tile(np.asarray(member_q, dtype=np.int64), nr)
    g_arr = np.repeat(np.arange(nr) * nq, len(member_q)) + q_arr
    groups_arr = np.tile(np.asarray(member_group, dtype=np.int64), nr)
    supports_arr = np.tile(np.asarray(member_support, dtype=np.int64), nr)
    member_pos = support_pos.reindex(pd.MultiIndex.from_arrays([g_arr, supports_arr])).to_numpy(dtype=float)
    member_pos = np.nan_to_num(member_pos, nan=np.inf)
    group_pos = pd.Series(member_pos).groupby([g_arr, groups_arr]).max()
    all_pos = np.full(n_groups, np.inf)
    np.minimum.at(all_pos, group_pos.index.get_level_values(0).to_numpy(), group_pos.to_numpy())
    return any_pos, all_pos


def _scope_miss(
    gold: pd.DataFrame,
    qids: pd.Index,
    folder_filter: Mapping[str, Sequence[str]],
    chunks: pd.DataFrame,
) -> np.ndarray:
    """Per question: 1 when no gold rel_path lies under any searched folder, 0 when one does, NaN when the question
    has no gold or no folder filter applied to it."""
    paths = gold[["query_id", "chunk_id"]].merge(chunks[["chunk_id", "rel_path"]].drop_duplicates(), on="chunk_id")
    paths_by_query = paths.groupby("query_id")["rel_path"].unique()
    miss = np.full(len(qids), np.nan)
    for q, query_id in enumerate(qids):
        if query_id not in folder_filter or query_id not in paths_by_query.index:
            continue
        folders = [f.strip("/") for f in folder_filter[query_id]]
        in_scope = any(_is_under(path, folder) for path in paths_by_query[query_id] for folder in folders)
        miss[q] = 0.0 if in_scope else 1.0
    return miss


def _is_under(path: str, folder: str) -> bool:
    return folder in ("", ".") or path == folder or path.startswith(folder + "/")


def _check_ks(ks: Iterable[int]) -> list[int]:
    cuts = sorted(set(ks))
    if not cuts or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in cuts):
        raise ValueError(f"ks must be positive integers, got {list(ks)!r}")
    return [int(k) for k in cuts]
