"""Bootstrap intervals and the per-slice aggregation of per-query metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS, aggregate_metrics
from rag_eval_assets.metrics.stats import bootstrap_ci, bootstrap_ci_columns


def test_bootstrap_ci_is_the_percentile_interval_of_resample_means() -> None:
    values = np.array([0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75])
    draws = np.random.default_rng(3).integers(0, len(values), size=(400, len(values)))
    means = values[draws].mean(axis=1)
    expected = np.quantile(means, [0.05, 0.95])
    assert bootstrap_ci(values, n_boot=400, seed=3, alpha=0.1) == pytest.approx(tuple(expected), abs=1e-12)


def test_bootstrap_ci_is_deterministic_and_depends_on_the_seed() -> None:
    values = np.random.default_rng(0).random(50)
    assert bootstrap_ci(values, 1000, 0) == bootstrap_ci(list(values), 1000, 0)
    assert bootstrap_ci(values, 1000, 0) != bootstrap_ci(values, 1000, 1)


def test_bootstrap_ci_contains_the_mean() -> None:
    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(1, 60))
        values = rng.choice([0.0, 1.0], size=n) if trial % 2 else rng.random(n)
        low, high = bootstrap_ci(values, 500, trial)
        assert low - 1e-12 <= values.mean() <= high + 1e-12, (trial, low, values.mean(), high)


def test_bootstrap_ci_width_matches_the_normal_approximation_for_a_proportion() -> None:
    values = np.tile([0.0, 1.0], 100)  # p = 0.5, n = 200: 95% half-width ~ 1.96 * sqrt(0.25 / 200) ~ 0.069
    low, high = bootstrap_ci(values, 4000, 0)
    assert 0.12 < high - low < 0.16
    assert low < 0.5 < high


def test_degenerate_samples() -> None:
    assert bootstrap_ci([1.0, 1.0, 1.0], 100, 0) == (1.0, 1.0)
    assert bootstrap_ci([0.25], 100, 0) == (0.25, 0.25)
    low, high = bootstrap_ci([], 100, 0)
    assert np.isnan(low) and np.isnan(high)


def test_columns_get_the_same_interval_alone_or_together() -> None:
    matrix = np.random.default_rng(5).random((30, 4))
    low, high = bootstrap_ci_columns(matrix, 300, 9)
    for j in range(4):
        assert (low[j], high[j]) == pytest.approx(bootstrap_ci(matrix[:, j], 300, 9), abs=1e-12)


def per_query_table() -> tuple[pd.DataFrame, pd.DataFrame]:
    questions = pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "type": ["fact", "fact", "definition", "negative"],
            "category": ["factual", None, "factual", "general"],
            "difficulty": ["easy", "hard", "easy", "easy"],
            "tags": [["code", "work"], [], ["code"], ["work", "work"]],
        }
    )
    rows = []
    for retriever, hits in (("bm25", [1.0, 0.0, 1.0, 0.0]), ("dense", [1.0, 1.0, 0.0, 0.0])):
        for q, hit in zip(questions["query_id"], hits):
            rows.append((q, retriever, 5, "hit@k", hit))
            rows.append((q, retriever, 5, "precision@k", np.nan if q == "q4" else hit / 5))
            rows.append((q, retriever, 5, "false_positive@k", 1.0 if q == "q4" and retriever == "dense" else np.nan))
    per_query = pd.DataFrame(rows, columns=["query_id", "retriever", "k", "metric", "value"])
    return per_query, questions


def test_aggregate_means_over_defined_values_per_slice() -> None:
    per_query, questions = per_query_table()
    aggregate = aggregate_metrics(per_query, questions, n_boot=200, seed=1)
    assert tuple(aggregate.columns) == AGGREGATE_COLUMNS
    columns = ["retriever", "slice", "metric", "value", "n"]
    got = {(r, s, m): (v, n) for r, s, m, v, n in aggregate[columns].itertuples(index=False)}
    assert got[("bm25", "all", "hit@k")] == (0.5, 4)
    assert got[("bm25", "all", "precision@k")] == (pytest.approx(2 / 15), 3)  # q4 undefined
    assert got[("bm25", "type=fact", "hit@k")] == (0.5, 2)
    assert got[("dense", "type=fact", "hit@k")] == (1.0, 2)
    assert got[("bm25", "category=factual", "hit@k")] == (1.0, 2)
    assert got[("bm25", "tag=code", "hit@k")] == (1.0, 2)
    assert got[("bm25", "tag=work", "hit@k")] == (0.5, 2)  # q4 lists "work" twice and still counts once
    assert got[("dense", "all", "false_positive_rate@k")] == (1.0, 1)
    assert ("bm25", "all", "false_positive_rate@k") not in got  # no defined value at all: no row
    assert not any(s.startswith("category=None") for _, s, _ in got)
    slices = list(dict.fromkeys(aggregate.loc[aggregate["retriever"] == "bm25", "slice"]))
    assert slices[0] == "all" and slices.index("type=definition") < slices.index("category=factual")
    assert list(dict.fromkeys(aggregate["metric"])) == ["hit@k", "precision@k", "false_positive_rate@k"]
    assert (aggregate["ci_low"] <= aggregate["value"] + 1e-12).all()
    assert (aggregate["value"] <= aggregate["ci_high"] + 1e-12).all()


def test_aggregate_is_deterministic_and_pairs_retrievers_question_by_question() -> None:
    per_query, questions = per_query_table()
    first = aggregate_metrics(per_query, questions, n_boot=300, seed=4)
    shuffled = per_query.sample(frac=1.0, random_state=2)
    pd.testing.assert_frame_equal(first, aggregate_metrics(shuffled, questions, n_boot=300, seed=4))
    # Same question set, same order, same seed: both retrievers' intervals come from the same resamples.
    one = first[(first["slice"] == "all") & (first["metric"] == "hit@k")].set_index("retriever")
    for retriever in ("bm25", "dense"):
        rows = per_query[(per_query["retriever"] == retriever) & (per_query["metric"] == "hit@k")]
        expected = bootstrap_ci(rows.sort_values("query_id")["value"].to_numpy(), 300, 4)
        assert (one.loc[retriever, "ci_low"], one.loc[retriever, "ci_high"]) == pytest.approx(expected)


def test_aggregate_rejects_unknown_questions_and_slices() -> None:
    per_query, questions = per_query_table()
    with pytest.raises(InputError, match="'q9' is not a question"):
        aggregate_metrics(per_query.assign(query_id="q9"), questions)
    with pytest.raises(InputError, match="missing column for slice 'vault'"):
        aggregate_metrics(per_query, questions, slices=("vault",))
