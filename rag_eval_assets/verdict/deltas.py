"""Every metric's change between two runs (slice "all", each with its paired test over the questions both runs
scored) and the configuration differences: what a comparison shows beside its gate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.runs.store import Run, flatten
from rag_eval_assets.verdict.gate import per_question_name
from rag_eval_assets.verdict.paired import PairedTest, paired_tests


@dataclass(frozen=True)
class MetricDelta:
    """Change of one aggregate (slice "all"); the paired test is over the questions both runs scored."""

    retriever: str
    k: int
    metric: str
    base: float | None
    cand: float | None
    delta: float | None
    n_pairs: int
    p_value: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class ConfigChange:
    key: str
    base: Any
    cand: Any


def paired_values(base: Run, cand: Run) -> pd.DataFrame:
    """query_id, retriever, k, metric, base, cand for every per-question value both runs hold (NaN kept)."""
    b = base.per_query_frame().rename(columns={"value": "base"})
    c = cand.per_query_frame().rename(columns={"value": "cand"})
    return b.merge(c, on=["query_id", "retriever", "k", "metric"]).sort_values(
        ["retriever", "k", "query_id"], kind="stable", ignore_index=True
    )


def paired_metric_tests(pairs: pd.DataFrame, *, n_perm: int, seed: int,
                  alpha: float) -> dict[tuple[str, int, str], PairedTest]:
    """The paired test of every (retriever, k, metric), all at once over a questions x cells matrix."""
    if pairs.empty:
        return {}
    keys = ["retriever", "k", "metric"]
    wide_base = pairs.pivot(index="query_id", columns=keys, values="base")
    wide_cand = pairs.pivot(index="query_id", columns=keys, values="cand").reindex(columns=wide_base.columns)
    tests = paired_tests(wide_base.to_numpy(), wide_cand.to_numpy(), n_perm=n_perm, seed=seed, alpha=alpha)
    return {(str(r), int(k), str(m)): test for (r, k, m), test in zip(wide_base.columns, tests)}


def metric_deltas(base: Run, cand: Run, tests: dict[tuple[str, int, str], PairedTest]) -> list[MetricDelta]:
    b = base.aggregate_frame()
    c = cand.aggregate_frame()
    b = b[b["slice"] == "all"][["retriever", "k", "metric", "value"]]
    c = c[c["slice"] == "all"][["retriever", "k", "metric", "value"]]
    both = b.merge(c, on=["retriever", "k", "metric"], how="outer", suffixes=("_base", "_cand"), sort=False)
    # Metrics in the order the base run lists them, then those only the candidate has.
    order = {m: i for i, m in enumerate(pd.unique(pd.concat([b["metric"], c["metric"]])))}
    both = both.assign(order=both["metric"].map(order)).sort_values(["retriever", "k", "order"], kind="stable")
    deltas = []
    for r in both.itertuples(index=False):
        base_value, cand_value = number(r.value_base), number(r.value_cand)
        test = tests.get((str(r.retriever), int(r.k), per_question_name(str(r.metric))))
        deltas.append(
            MetricDelta(
                retriever=str(r.retriever),
                k=int(r.k),
                metric=str(r.metric),
                base=base_value,
                cand=cand_value,
                delta=None if base_value is None or cand_value is None else cand_value - base_value,
                n_pairs=test.n if test else 0,
                p_value=number(test.p_value) if test else None,
                ci_low=number(test.ci_low) if test else None,
                ci_high=number(test.ci_high) if test else None,
            )
        )
    return deltas


def config_changes(base: dict[str, Any], cand: dict[str, Any]) -> list[ConfigChange]:
    b, c = flatten(base), flatten(cand)
    keys = sorted(b.keys() | c.keys())
    return [ConfigChange(key, b.get(key), c.get(key)) for key in keys if b.get(key) != c.get(key)]


def number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if np.isnan(value) else value
