"""Which metric judges each (retriever, k) cell of a run, and the correction of the cells' p-values.

A cell is judged on a metric that means something for it. With `metric: auto` that is, in this order, the first
that has a value for some question of the cell: seed 000's weighted_score (only questions with seed 000 rules have
one), the judge's correctness, seed 003's json_v2_score, and otherwise the cell's retrieval metric (nDCG@k).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.verdict.joint import max_t_adjusted
from rag_eval_assets.verdict.settings import AUTO, GateSettings

WEIGHTED_SCORE = "weighted_score"
# The run-level score is a weighted mean of a per-question value stored under another name.
PER_QUESTION_NAME = {WEIGHTED_SCORE: "question_score"}
AUTO_ANSWER_METRICS = (WEIGHTED_SCORE, "correctness", "json_v2_score")
# A question "succeeds" on a metric when its value reaches half the metric's scale (0-1 unless listed here).
METRIC_SCALE = {"correctness": 5.0, "groundedness": 5.0, "json_v2_score": 100.0}


def per_question_name(metric: str) -> str:
    return PER_QUESTION_NAME.get(metric, metric)


def success_threshold(metric: str) -> float:
    return METRIC_SCALE.get(metric, 1.0) / 2


def candidates(gate: GateSettings) -> tuple[str, ...]:
    """The metrics a cell may be judged on, best first."""
    return (*AUTO_ANSWER_METRICS, gate.retrieval_metric) if gate.metric == AUTO else (gate.metric,)


def choose_metric(available: Iterable[str], gate: GateSettings) -> str | None:
    """The first candidate among `available` (metric names, per-question names of run scores accepted), or None."""
    have = set(available)
    for metric in candidates(gate):
        if metric in have or per_question_name(metric) in have:
            return metric
    return None


def _holm(p: np.ndarray) -> np.ndarray:
    """Step-down: p_(i) * (m - i + 1) made monotone (Holm 1979)."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    return adjusted


# Corrections of marginal p-values; `joint` needs the differences themselves (joint_adjusted).
MARGINAL: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "holm": _holm,
    "bonferroni": lambda p: p * len(p),
    "none": lambda p: p,
}


def adjust_p_values(p_values: Iterable[float | None], method: str) -> list[float | None]:
    """Marginal p-values corrected for testing several cells at once (holm, bonferroni, none); None stays None and
    is not counted as a test."""
    if method not in MARGINAL:
        raise ValueError(f"correction must be one of {tuple(MARGINAL)} for marginal p-values, got {method!r}")
    values = list(p_values)
    tested = [i for i, p in enumerate(values) if p is not None]
    out: list[float | None] = list(values)
    if tested:
        adjusted = np.minimum(MARGINAL[method](np.array([values[i] for i in tested], dtype=float)), 1.0)
        for i, value in zip(tested, adjusted):
            out[i] = float(value)
    return out


def joint_adjusted(diffs: np.ndarray, p_values: Iterable[float], *, n_perm: int, seed: int) -> list[float]:
    """Step-down max-T adjusted p-values of the columns of an (questions x cells) matrix of differences (NaN where a
    question has no pair in a cell), never below the cell's own p-value (a drawn set of patterns can land either
    side of it)."""
    adjusted, _ = max_t_adjusted(diffs, n_perm=n_perm, seed=seed)
    return [float(max(a, p)) for a, p in zip(adjusted, p_values)]


def corrected(p_values: Sequence[float | None], diffs: Sequence[pd.Series], method: str, *, n_perm: int,
              seed: int) -> list[float | None]:
    """The p-values of several tests corrected by `method`; None (no test) stays None and is not counted. `diffs`:
    each test's (weighted) differences indexed by question, which the joint correction lines up by question so that
    a sign flip of a question flips its difference in every test at once."""
    if method != "joint":
        return adjust_p_values(p_values, method)
    tested = [i for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if tested:
        matrix = pd.concat([diffs[i] for i in tested], axis=1).to_numpy(dtype=float)
        for i, p in zip(tested, joint_adjusted(matrix, [p_values[i] for i in tested], n_perm=n_perm, seed=seed)):
            out[i] = p
    return out


def weighted_terms(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-question values (or differences) scaled so that their plain mean is the weighted mean Σ w v / Σ w: means,
    bootstrap intervals and sign-flip tests then describe the weighted score (each question still flips alone)."""
    return values * weights * (len(weights) / weights.sum())


def unhealthy(call_health: Iterable[Mapping[str, Any]], retriever: str, k: int, metric: str, limit: float) -> str | None:
    """Why `metric` of cell (retriever, k) must not be compared: its calls (or the answerer's, for an answer metric)
    failed more often than `limit`; None when healthy or not recorded."""
    for row in call_health:
        if str(row.get("retriever")) != retriever or int(row.get("k", -1)) != k:
            continue
        fed = row.get("metric")
        if fed not in (metric, per_question_name(metric)) and not (fed == "answer" and is_answer_metric(metric)):
            continue
        rate = row.get("error_rate")
        if rate is not None and rate > limit:
            return f"{row.get('errors')} of {row.get('calls')} {row.get('stage')} calls failed ({rate:.0%} > {limit:.0%})"
    return None


def is_answer_metric(metric: str) -> bool:
    # Retrieval metrics are the @k metrics of metrics/retrieval.py and the folder scope miss.
    return not (metric.endswith("@k") or metric in ("scope_miss", "scope_miss_rate"))
