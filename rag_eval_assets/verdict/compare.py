"""Comparison of two runs and the verdict (seed 000 section 7, seed 002 "Run Comparison Tool").

Each (retriever, k) cell both runs hold is judged on its gate metric (verdict/gate.py) by a paired test over the
questions both runs scored, or with `calibrated` a judge metric on the difference of the runs' calibrated means
(verdict/judged.py; whatever the judge's agreement), corrected across the judged cells (by default jointly:
verdict/joint.py). The verdict is `worse` when a cell fails, `better`
when none fails and some cell improved significantly, `no significant change` otherwise, and `incompatible` when the
runs measure different things. Exit codes: 0 better or no significant change, 1 worse, 2 incompatible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.runs.contents import jsonable
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.corrections import corrected
from rag_eval_assets.verdict.deltas import (ConfigChange, MetricDelta, config_changes, metric_deltas, number,
                                           paired_metric_tests, paired_values)
from rag_eval_assets.verdict.evidence import (BETTER_FIRST, WORSE_FIRST, CellEvidence, QuestionChange, RowIndex,
                                             change_record, evidence_of, evidence_record, ordered, question_changes)
from rag_eval_assets.verdict.gate import (choose_metric, per_question_name, success_threshold, unhealthy_in_either,
                                         weighted_terms)
from rag_eval_assets.verdict.judged import (
    CalibratedChange,
    JudgeTrust,
    calibrated_change,
    graded_frame,
    is_judge_metric,
    judge_trust,
    too_few_grades,
)
from rag_eval_assets.verdict.paired import paired_tests
from rag_eval_assets.verdict.invariants import invariants, retrievers_of_one_run
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets.verdict.text import graded_n, interval_text, p_text, signed

BETTER, WORSE, NO_CHANGE, INCOMPATIBLE = "better", "worse", "no significant change", "incompatible"
UNDEFINED = "undefined"
PAIRED, CALIBRATED = "paired", "calibrated"  # how a cell's change was estimated and tested
# The verdict as a number, for Dagster's plots night over night.
VERDICT_SCORE = {BETTER: 1.0, NO_CHANGE: 0.0, WORSE: -1.0, INCOMPATIBLE: -2.0}
EXIT_CODES = {BETTER: 0, NO_CHANGE: 0, WORSE: 1, INCOMPATIBLE: 2}
# Deltas are differences of means summed in different orders; a change smaller than this is no change.
EPSILON = 1e-9


@dataclass(frozen=True)
class SkippedMetric:
    """The judge metric a cell would have been judged on, and why it was not: its judge is not trusted."""

    metric: str
    why: str
    kappa: float | None
    n: int  # graded judgements the kappa is over


@dataclass(frozen=True)
class GateCell:
    retriever: str
    k: int
    metric: str | None  # None: no candidate metric has a value in both runs
    base: float | None  # (weighted) means over the questions both runs scored
    cand: float | None
    delta: float | None
    ci_low: float | None  # the test inverted at the gate's alpha: excludes 0 exactly when p_value < alpha
    ci_high: float | None
    n_pairs: int
    p_value: float | None  # paired sign-flip test, or the calibrated difference's z test
    p_adjusted: float | None  # corrected across the judged cells
    significant: bool
    regressions: int  # questions whose gate metric flipped from success to failure (max_regressions counts these)
    improvements: int  # ... from failure to success
    result: str  # better | worse | no significant change | undefined
    reasons: tuple[str, ...] = ()  # why the cell failed, or why it is undefined
    estimate: str = PAIRED  # calibrated: base, cand, delta, interval and p are of the calibrated means
    n_graded_base: int | None = None  # the grades each calibrated mean rests on, of its run's judged answers
    n_graded_cand: int | None = None
    n_answers_base: int | None = None
    n_answers_cand: int | None = None
    skipped: tuple[SkippedMetric, ...] = ()
    notes: tuple[str, ...] = ()  # for the reader: a metric passed over, a calibrated estimate not made
    drops: int = 0  # questions whose gate metric fell, flipped or not
    gains: int = 0

    @property
    def name(self) -> str:
        return f"{self.retriever}@{self.k}"

    @property
    def identical(self) -> bool:
        """Judged, and no question's gate metric moved in either direction."""
        return self.result != UNDEFINED and self.drops == 0 and self.gains == 0


@dataclass(frozen=True)
class Comparison:
    base_id: str
    cand_id: str
    gate: GateSettings
    options: dict[str, Any]  # retrievers / ks selected, ignore_invariants
    incompatible: tuple[str, ...]
    warnings: tuple[str, ...]
    config_changes: tuple[ConfigChange, ...]
    deltas: tuple[MetricDelta, ...]
    # Drops and gains of the gate metric (flips marked), both in the cells whose change counts: significant ones,
    # or every judged cell without gate.significant_only; largest drop (gain) first.
    regressions: tuple[QuestionChange, ...]
    improvements: tuple[QuestionChange, ...]
    cells: tuple[GateCell, ...]
    all_regressions: int = field(default=0)  # drops in every judged cell, significant or not
    all_improvements: int = field(default=0)
    judges: tuple[JudgeTrust, ...] = ()  # each judge's agreement with the person's grades, where it has any
    evidence: tuple[CellEvidence, ...] = ()  # the deciding cells' (and any asked for), in the gate's cell order

    @property
    def verdict(self) -> str:
        if self.incompatible:
            return INCOMPATIBLE
        results = {c.result for c in self.cells}
        return WORSE if WORSE in results else BETTER if BETTER in results else NO_CHANGE

    @property
    def deciding_cells(self) -> list[GateCell]:
        """The cells whose result is the verdict (none for `no significant change` and `incompatible`)."""
        return [c for c in self.cells if c.result == self.verdict and c.result in (BETTER, WORSE)]

    @property
    def failures(self) -> list[str]:
        return [reason for c in self.cells if c.result == WORSE for reason in c.reasons]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def as_json(self) -> dict[str, Any]:
        """comparison.json: the verdict, both run ids, the gate settings, and one record per cell."""
        return jsonable({
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "base_run_id": self.base_id,
            "cand_run_id": self.cand_id,
            "gate": self.gate.model_dump(),
            "options": self.options,
            "incompatible": list(self.incompatible),
            "warnings": list(self.warnings),
            "deciding_cells": [f"{c.retriever}@{c.k}" for c in self.deciding_cells],
            "cells": [cell_record(c) for c in self.cells],
            "judges": [asdict(j) for j in self.judges],
            "deltas": [asdict(d) for d in self.deltas],
            "regressions": len(self.regressions),
            "improvements": len(self.improvements),
            "all_regressions": self.all_regressions,
            "all_improvements": self.all_improvements,
            "top_regressions": [change_record(f) for f in self.regressions[:self.gate.top_questions]],
            "top_improvements": [change_record(f) for f in self.improvements[:self.gate.top_questions]],
            "identical_cells": [c.name for c in self.cells if c.identical],
            "evidence": [evidence_record(e) for e in self.evidence],
        })


def cell_record(c: GateCell) -> dict[str, Any]:
    record = asdict(c)
    record["reasons"] = "; ".join(c.reasons)
    record["identical"] = c.identical
    return record


def compare_runs(
    base: Run,
    cand: Run,
    gate: GateSettings = GateSettings(),
    *,
    ignore_invariants: bool = False,
    retrievers: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    n_perm: int = 10000,
    seed: int = 0,
    grading: Grading | None = None,
    explain: Sequence[str] = (),
) -> Comparison:
    """Compare candidate `cand` with baseline `base` under `gate`, on every (retriever, k) both runs hold or those
    of `retrievers` / `ks`. `grading`: the person's grades of judged answers, which decide whether each judge is
    trusted and make the calibrated estimates of `gate.calibrated`; None: no grades. The evidence is of the deciding
    cells and of the cells named in `explain` ("bm25@10"; KeyError naming the cells there are for one not judged)."""
    options = {
        "ignore_invariants": ignore_invariants,
        "retrievers": list(retrievers) if retrievers is not None else None,
        "ks": list(ks) if ks is not None else None,
    }
    mismatches, warnings = invariants(base, cand)
    incompatible: list[str] = []
    if ignore_invariants:
        warnings += [f"ignored: {m}" for m in mismatches]
    else:
        incompatible += mismatches

    warnings += retrievers_of_one_run(base, cand, retrievers if retrievers is not None else gate.retrievers)
    pairs = paired_values(base, cand)
    tests = paired_metric_tests(pairs, n_perm=n_perm, seed=seed, alpha=gate.alpha)
    deltas = metric_deltas(base, cand, tests)
    questions = {row["query_id"]: row.get("question") for run in (base, cand) for row in run.results}
    weights = {row["query_id"]: float(row.get("weight") or 1.0) for row in cand.results}
    grading = grading or Grading()
    graded = (graded_frame(base, grading), graded_frame(cand, grading))
    judges = judge_trust(pd.concat(graded, ignore_index=True), grading)

    cells, changes, diffs = [], [], []
    for (retriever, k), cell_pairs in pairs.groupby(["retriever", "k"], sort=True):
        if not all(chosen is None or value in chosen for value, chosen in
                   ((retriever, retrievers), (retriever, gate.retrievers), (k, ks))):
            continue
        cell, cell_diffs, cell_changes, cell_warnings = _judge_cell(
            str(retriever), int(k), cell_pairs, base, cand, weights, questions, gate, judges, graded, grading,
            n_perm=n_perm, seed=seed)
        cells.append(cell)
        diffs.append(cell_diffs)
        changes.append(cell_changes)
        warnings += cell_warnings
    cells = _decide(cells, diffs, gate, n_perm=n_perm, seed=seed)
    counted = [ch for c, cell_changes in zip(cells, changes) if c.significant or not gate.significant_only
               for ch in cell_changes]
    every = [ch for cell_changes in changes for ch in cell_changes]
    results = {c.result for c in cells}
    verdict = WORSE if WORSE in results else BETTER if BETTER in results else None
    evidence = evidence_of(cells, changes, [c.name for c in cells if verdict and c.result == verdict],
                           verdict == WORSE, explain, gate.top_questions, (RowIndex(base), RowIndex(cand)), graded)
    if not any(c.result != UNDEFINED for c in cells):
        narrowed = retrievers is not None or ks is not None or gate.retrievers is not None
        selected = " among the retrievers / k selected" if narrowed else ""
        incompatible.append(
            f"no retriever and k has a value of the gate metric ({gate.metric}) in both runs{selected}"
        )
    return Comparison(
        base_id=base.run_id,
        cand_id=cand.run_id,
        gate=gate,
        options=options,
        incompatible=tuple(incompatible),
        warnings=tuple(warnings),
        config_changes=tuple(config_changes(base.config, cand.config)),
        deltas=tuple(deltas),
        regressions=tuple(ordered((ch for ch in counted if ch.diff < 0), WORSE_FIRST)),
        improvements=tuple(ordered((ch for ch in counted if ch.diff > 0), BETTER_FIRST)),
        cells=tuple(cells),
        all_regressions=sum(1 for ch in every if ch.diff < 0),
        all_improvements=sum(1 for ch in every if ch.diff > 0),
        judges=tuple(judges.values()),
        evidence=tuple(evidence),
    )


def _judge_cell(
    retriever: str,
    k: int,
    pairs: pd.DataFrame,
    base: Run,
    cand: Run,
    weights: dict[str, float],
    questions: dict[str, str | None],
    gate: GateSettings,
    judges: dict[str, JudgeTrust],
    graded: tuple[pd.DataFrame, pd.DataFrame],
    grading: Grading,
    *,
    n_perm: int,
    seed: int,
) -> tuple[GateCell, pd.Series | None, list[QuestionChange], list[str]]:
    """The cell's metric, test, (weighted) differences by question (None for a calibrated test, which has none) and
    the questions that moved; its result is settled by _decide once every cell is tested."""
    both = pairs[pairs["base"].notna() & pairs["cand"].notna()]
    warnings: list[str] = []
    healthy = []
    for metric in set(both["metric"]):
        why = unhealthy_in_either(base, cand, retriever, k, metric, gate.max_error_rate)
        if why:
            warnings.append(f"{retriever}@{k}: {metric} not compared: {why}")
        else:
            healthy.append(metric)
    # Trust matters only where raw judge scores decide: a calibrated estimate is valid for any judge (verdict/judged.py)
    untrusted = {name: j for name, j in judges.items() if not j.trusted and not (
        gate.calibrated and too_few_grades(*graded, retriever, k, name, grading) is None)}
    metric = choose_metric(healthy, gate, untrusted)
    skipped, notes = [], []
    would = choose_metric(healthy, gate)
    if would in untrusted:
        j = untrusted[would]
        skipped.append(SkippedMetric(would, f"its judge is {j.reason}", j.kappa, j.n))
        notes.append(f"{retriever}@{k}: {would} not used, its judge is {j.reason}; judged on {metric or 'nothing'}")
    if metric is None:
        wanted = gate.metric if gate.metric != "auto" else f"auto ({gate.retrieval_metric} or an answer metric)"
        reason = f"the gate metric {wanted} has no value for any question in both runs"
        cell = _cell(retriever, k, None, result=UNDEFINED, reasons=(reason,), skipped=tuple(skipped),
                     notes=tuple(notes))
        return cell, pd.Series(dtype=float), [], warnings
    rows = both[both["metric"] == per_question_name(metric)]
    b, c = rows["base"].to_numpy(dtype=float), rows["cand"].to_numpy(dtype=float)
    w = np.array([weights.get(q, 1.0) for q in rows["query_id"]])
    terms = weighted_terms(c - b, w)
    test = paired_tests(np.zeros((len(b), 1)), terms[:, None], n_perm=n_perm, seed=seed, alpha=gate.alpha)[0]
    changes = question_changes(rows, retriever, k, metric, success_threshold(metric), questions)
    counts = dict(regressions=sum(1 for ch in changes if ch.flip and ch.diff < 0),
                  improvements=sum(1 for ch in changes if ch.flip and ch.diff > 0),
                  drops=sum(1 for ch in changes if ch.diff < 0), gains=sum(1 for ch in changes if ch.diff > 0),
                  skipped=tuple(skipped))
    change = None
    if gate.calibrated and is_judge_metric(metric):
        change = calibrated_change(*graded, retriever, k, metric, weights, grading, gate.alpha)
        if isinstance(change, str):
            notes.append(f"{retriever}@{k}: {metric} not calibrated, {change}: paired test on the raw judge scores")
    if isinstance(change, CalibratedChange):
        cell = _cell(
            retriever, k, metric, base=change.base.estimate, cand=change.cand.estimate, delta=change.delta,
            ci_low=change.ci_low, ci_high=change.ci_high, n_pairs=test.n, p_value=change.p_value,
            estimate=CALIBRATED, n_graded_base=change.base.n_graded, n_graded_cand=change.cand.n_graded,
            n_answers_base=change.base.n_answers, n_answers_cand=change.cand.n_answers, notes=tuple(notes), **counts)
        return cell, None, changes, warnings
    cell = _cell(
        retriever, k, metric,
        base=float(np.average(b, weights=w)), cand=float(np.average(c, weights=w)), delta=test.delta,
        ci_low=test.ci_low, ci_high=test.ci_high, n_pairs=test.n, p_value=number(test.p_value),
        notes=tuple(notes), **counts,
    )
    return cell, pd.Series(terms, index=rows["query_id"].to_numpy()), changes, warnings


def _cell(retriever: str, k: int, metric: str | None, **values: Any) -> GateCell:
    defaults = dict(base=None, cand=None, delta=None, ci_low=None, ci_high=None, n_pairs=0, p_value=None,
                    p_adjusted=None, significant=False, regressions=0, improvements=0, result=NO_CHANGE, reasons=())
    return GateCell(retriever, k, metric, **{**defaults, **values})


def _decide(cells: list[GateCell], diffs: list[pd.Series | None], gate: GateSettings, *, n_perm: int,
            seed: int) -> list[GateCell]:
    """Correct the p-values across the judged cells, then settle each cell's result."""
    adjusted = corrected([c.p_value if c.result != UNDEFINED else None for c in cells], diffs, gate.correction,
                         n_perm=n_perm, seed=seed)
    decided = []
    for cell, p_adj in zip(cells, adjusted):
        if cell.result == UNDEFINED:
            decided.append(cell)
            continue
        significant = p_adj is not None and p_adj < gate.alpha
        counts = significant or not gate.significant_only
        name = f"{cell.retriever}@{cell.k}"
        reasons = []
        if cell.delta < gate.min_delta - EPSILON and counts:
            reasons.append(f"{name}: {metric_label(cell)} delta {signed(cell.delta)} "
                           f"{interval_text(cell.ci_low, cell.ci_high)}{_calibrated_n(cell)} "
                           f"is below min_delta {gate.min_delta} (p_adj {p_text(p_adj)})")
        if gate.max_regressions is not None and cell.regressions > gate.max_regressions and counts:
            reasons.append(f"{name}: {cell.regressions} regressions exceed max_regressions {gate.max_regressions}")
        result = WORSE if reasons else BETTER if significant and cell.delta > EPSILON else NO_CHANGE
        decided.append(replace(cell, p_adjusted=p_adj, significant=significant, result=result, reasons=tuple(reasons)))
    return decided


def metric_label(cell: GateCell) -> str:
    """The cell's metric, marked when its change is of the calibrated means."""
    return f"{cell.metric} (calibrated)" if cell.estimate == CALIBRATED else str(cell.metric)


def _calibrated_n(cell: GateCell) -> str:
    return "" if cell.estimate != CALIBRATED else \
        f" ({graded_n(cell.n_graded_base, cell.n_answers_base, cell.n_graded_cand, cell.n_answers_cand)})"
