"""Which metric judges each (retriever, k) cell of a run, and what counts as a question's success on it.

A cell is judged on a metric that means something for it. With `metric: auto` that is, in this order, the first
that has a value for some question of the cell: seed 000's weighted_score (only questions with seed 000 rules have
one), the judge's correctness, seed 003's json_v2_score, and otherwise the cell's retrieval metric (nDCG@k). A judge
metric whose judge the person's grades do not trust (verdict/judged.py) is passed over where its raw scores would
decide; where the grades decide (the calibrated means of `calibrated: true`), trust does not matter.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np

from rag_eval_assets.metrics.aggregate import RATE_NAMES
from rag_eval_assets.metrics.json_v2 import JSON_V2_SCORE
from rag_eval_assets.metrics.rule_score import WEIGHTED_SCORE
from rag_eval_assets.metrics.retrieval import SCOPE_MISS
from rag_eval_assets.metrics.scales import top_of_scale
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.settings import AUTO, GateSettings

# The run-level score is a weighted mean of a per-question value stored under another name.
PER_QUESTION_NAME = {WEIGHTED_SCORE: "question_score"}
AUTO_ANSWER_METRICS = (WEIGHTED_SCORE, "correctness", JSON_V2_SCORE)


def per_question_name(metric: str) -> str:
    return PER_QUESTION_NAME.get(metric, metric)


def success_threshold(metric: str) -> float:
    """A question "succeeds" on a metric when its value reaches half the metric's scale."""
    return top_of_scale(metric) / 2


def candidates(gate: GateSettings) -> tuple[str, ...]:
    """The metrics a cell may be judged on, best first."""
    return (*AUTO_ANSWER_METRICS, gate.retrieval_metric) if gate.metric == AUTO else (gate.metric,)


def choose_metric(available: Iterable[str], gate: GateSettings, untrusted: Collection[str] = ()) -> str | None:
    """The first candidate among `available` (metric names, per-question names of run scores accepted), or None.
    A metric of `untrusted` (a judge metric whose judge is not trusted) is passed over; an explicit gate metric that
    is untrusted falls back to the retrieval metric, the one metric no judge makes."""
    have = set(available)
    order = candidates(gate)
    if gate.metric != AUTO and gate.metric in untrusted:
        order = (gate.metric, gate.retrieval_metric)
    for metric in order:
        if metric not in untrusted and (metric in have or per_question_name(metric) in have):
            return metric
    return None


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


def unhealthy_in_either(base: Run, cand: Run, retriever: str, k: int, metric: str, limit: float) -> str | None:
    """unhealthy in the base run or in the candidate, saying which."""
    for run, role in ((base, "base"), (cand, "candidate")):
        why = unhealthy(run.metrics.get("call_health") or [], retriever, k, metric, limit)
        if why:
            return f"{why} in the {role} run"
    return None


def is_answer_metric(metric: str) -> bool:
    # Retrieval metrics are the @k metrics of metrics/retrieval.py and the folder scope miss.
    return not (metric.endswith("@k") or metric in (SCOPE_MISS, RATE_NAMES[SCOPE_MISS]))
