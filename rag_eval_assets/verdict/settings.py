"""The quality gate's settings (rag_eval.yaml's report.gate), recorded in each comparison."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StrictBool, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.settings_base import Section, at_least, between
from rag_eval_assets.verdict.corrections import CORRECTIONS, JOINT

AUTO = "auto"


class GateSettings(Section):
    """Every knob of the gate."""

    metric: StrictStr = AUTO  # or any metric name of the runs: ndcg@k, hit@k, weighted_score, correctness, ...
    retrieval_metric: StrictStr = "ndcg@k"  # what `auto` judges a cell on when it has no answer metric
    min_delta: StrictFloat = 0.0  # a cell fails when its delta is below this ...
    max_regressions: Annotated[StrictInt, at_least(0)] | None = None  # ... or when more questions flip to failure
    alpha: Annotated[StrictFloat, between(0, 1, open=True)] = 0.05
    # across the cells the gate judges: joint = step-down max-T over sign flips of whole questions (verdict/joint.py)
    correction: Literal[*CORRECTIONS] = JOINT
    significant_only: StrictBool = True  # failures count only where the cell's paired test is significant
    # a metric whose calls failed more often than this (in either run) is not compared
    max_error_rate: Annotated[StrictFloat, between(0, 1)] = 0.05
    retrievers: tuple[StrictStr, ...] | None = None  # the retrievers the gate judges; None: every retriever
    # a judge metric's cell is judged on the two runs' calibrated (PPI++) means where both have judge.min_grades grades
    calibrated: StrictBool = False
    # the questions listed by name: regressions, improvements, and per deciding cell those that moved it most
    top_questions: Annotated[StrictInt, at_least(1)] = 10
