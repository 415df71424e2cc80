"""Means over questions, per slice of the evalset, with bootstrap confidence intervals."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.metrics.stats import bootstrap_ci_columns

AGGREGATE_COLUMNS = ("retriever", "k", "slice", "metric", "value", "ci_low", "ci_high", "n")
# Per-query 0/1 indicators whose mean is reported under a rate's name.
RATE_NAMES = {"false_positive@k": "false_positive_rate@k", "scope_miss": "scope_miss_rate"}
# Slices named in the singular over a list column: each element of the list is a slice of its own.
LIST_SLICES = {"tag": "tags", "folder": "folders"}


def aggregate_metrics(
    per_query: pd.DataFrame,
    questions: pd.DataFrame,
    slices: Sequence[str] = ("type", "category", "difficulty", "tag"),
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean of each (retriever, k, slice, metric) over the questions whose value is defined (not NaN), with a 95%
    percentile bootstrap interval over those questions and their count `n`; combinations with n = 0 are left out.

    Slice "all" holds every question; "type=fact" the questions whose `type` is "fact"; "tag=code" those whose `tags`
    list holds "code". A question with no value for a slice's column is in no slice of it.
    """
    membership = slice_membership(questions, slices)
    unknown = sorted(set(per_query["query_id"]) - set(questions["query_id"]))
    if unknown:
        raise InputError(
            [InputProblem("per_query", None, "query_id", f"{q!r} is not a question of the evalset") for q in unknown]
        )
    table = per_query[per_query["value"].notna()].merge(membership, on="query_id")
    # Metrics keep the order the per-query table lists them in, not alphabetical order.
    table["metric"] = pd.Categorical(table["metric"], categories=pd.unique(per_query["metric"]), ordered=True)
    keys = ["retriever", "k", "slice", "metric"]
    # Values of a group in query_id order, so equal-sized groups of two retrievers are resampled in pairs.
    table = table.sort_values(keys + ["query_id"], kind="stable", ignore_index=True)
    grouped = table.groupby(keys, sort=False, observed=True)
    summary = grouped["value"].agg(["mean", "size"]).reset_index()
    # Groups are contiguous runs of the sorted table, numbered in order of appearance like the rows of `summary`.
    first_row = np.unique(grouped.ngroup().to_numpy(), return_index=True)[1]
    values = table["value"].to_numpy(dtype=float)
    low = np.empty(len(summary))
    high = np.empty(len(summary))
    sizes = summary["size"].to_numpy()
    for n in np.unique(sizes):
        which = np.flatnonzero(sizes == n)
        columns = values[first_row[which][None, :] + np.arange(n)[:, None]]
        low[which], high[which] = bootstrap_ci_columns(columns, n_boot, seed)
    out = pd.DataFrame(
        {
            "retriever": summary["retriever"],
            "k": summary["k"],
            "slice": summary["slice"].astype(str),
            "metric": summary["metric"].astype(str).map(lambda name: RATE_NAMES.get(name, name)),
            "value": summary["mean"].to_numpy(dtype=float),
            "ci_low": low,
            "ci_high": high,
            "n": sizes.astype(np.int64),
        }
    )
    return out


def slice_membership(questions: pd.DataFrame, slices: Sequence[str]) -> pd.DataFrame:
    """(query_id, slice) pairs, "all" first, then each requested slice's values in sorted order."""
    problems = [
        InputProblem("questions", None, LIST_SLICES.get(name, name), f"missing column for slice {name!r}")
        for name in slices
        if LIST_SLICES.get(name, name) not in questions.columns
    ]
    if problems:
        raise InputError(problems)
    questions = questions.reset_index(drop=True)
    parts = [pd.DataFrame({"query_id": questions["query_id"].to_numpy(), "slice": "all"})]
    for name in slices:
        column = questions[LIST_SLICES.get(name, name)]
        if name in LIST_SLICES:
            column = column.explode()
        present = column[column.notna()]
        labels = pd.DataFrame(
            {"query_id": questions["query_id"].loc[present.index].to_numpy(), "slice": [f"{name}={v}" for v in present]}
        )
        parts.append(labels.drop_duplicates().sort_values("slice", kind="stable"))
    membership = pd.concat(parts, ignore_index=True)
    order = pd.unique(membership["slice"])
    membership["slice"] = pd.Categorical(membership["slice"], categories=order, ordered=True)
    return membership
