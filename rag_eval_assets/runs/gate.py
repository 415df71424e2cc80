"""The quality gate's settings, and which metric judges each (retriever, k) cell of a run.

A cell is judged on a metric that means something for it. With `metric: auto` that is, in this order, the first
that has a value for some question of the cell: seed 000's weighted_score (only questions with seed 000 rules have
one), the judge's correctness, seed 003's json_v2_score, and otherwise the cell's retrieval metric (nDCG@k).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, get_args

import numpy as np
from pydantic import StrictBool, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.settings_base import Section, at_least, between

AUTO = "auto"
WEIGHTED_SCORE = "weighted_score"
# The run-level score is a weighted mean of a per-question value stored under another name.
PER_QUESTION_NAME = {WEIGHTED_SCORE: "question_score"}
AUTO_ANSWER_METRICS = (WEIGHTED_SCORE, "correctness", "json_v2_score")
Correction = Literal["holm", "bonferroni", "none"]
CORRECTIONS: tuple[str, ...] = get_args(Correction)
# A question "succeeds" on a metric when its value reaches half the metric's scale (0-1 unless listed here).
METRIC_SCALE = {"correctness": 5.0, "groundedness": 5.0, "json_v2_score": 100.0}


class GateSettings(Section):
    """Every knob of the gate (rag_eval.yaml's report.gate); recorded in each comparison."""

    metric: StrictStr = AUTO  # or any metric name of the runs: ndcg@k, hit@k, weighted_score, correctness, ...
    retrieval_metric: StrictStr = "ndcg@k"  # what `auto` judges a cell on when it has no answer metric
    min_delta: StrictFloat = 0.0  # a cell fails when its delta is below this ...
    max_regressions: Annotated[StrictInt, at_least(0)] | None = None  # ... or when more questions flip to failure
    alpha: Annotated[StrictFloat, between(0, 1, open=True)] = 0.05
    correction: Correction = "holm"  # across the cells the gate judges
    significant_only: StrictBool = True  # failures count only where the cell's paired test is significant
    # a metric whose calls failed more often than this (in either run) is not compared
    max_error_rate: Annotated[StrictFloat, between(0, 1)] = 0.05


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


def adjust_p_values(p_values: Iterable[float | None], method: str) -> list[float | None]:
    """p-values corrected for testing several cells at once; None stays None and is not counted as a test.

    holm: step-down, p_(i) * (m - i + 1) made monotone (Holm 1979); bonferroni: p * m; none: unchanged.
    """
    values = list(p_values)
    if method not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {method!r}")
    tested = [i for i, p in enumerate(values) if p is not None]
    m = len(tested)
    out: list[float | None] = list(values)
    if method == "none" or m == 0:
        return out
    p = np.array([values[i] for i in tested], dtype=float)
    if method == "bonferroni":
        adjusted = np.minimum(p * m, 1.0)
    else:
        order = np.argsort(p, kind="stable")
        stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
        adjusted = np.empty(m)
        adjusted[order] = np.minimum(stepped, 1.0)
    for i, value in zip(tested, adjusted):
        out[i] = float(value)
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
