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

from rag_eval_assets.runs.store import Run, config_value, flatten, jsonable
from rag_eval_assets.verdict.corrections import corrected
from rag_eval_assets.verdict.gate import choose_metric, per_question_name, success_threshold, unhealthy, weighted_terms
from rag_eval_assets.verdict.judged import (CalibratedChange, Grading, JudgeTrust, calibrated_change, graded_frame,
                                            is_judge_metric, judge_trust, too_few_grades)
from rag_eval_assets.verdict.paired import PairedTest, paired_tests
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets.verdict.text import interval_text, p_text, signed

# (name, dotted key in config.json): runs that differ in one of these measure different things.
DATASET_INVARIANTS = (
    ("evalset_sha256", "version_tuple.dataset.evalset_sha256"),
    ("corpus_sha256", "version_tuple.dataset.corpus_sha256"),
)
JUDGE_INVARIANTS = (
    ("judge_model", "version_tuple.judge.model"),
    ("judge_prompt_version", "version_tuple.judge.prompt_version"),
    ("judge_temperature", "version_tuple.judge.temperature"),
)
BETTER, WORSE, NO_CHANGE, INCOMPATIBLE = "better", "worse", "no significant change", "incompatible"
UNDEFINED = "undefined"
PAIRED, CALIBRATED = "paired", "calibrated"  # how a cell's change was estimated and tested
# The verdict as a number, for Dagster's plots night over night.
VERDICT_SCORE = {BETTER: 1.0, NO_CHANGE: 0.0, WORSE: -1.0, INCOMPATIBLE: -2.0}
EXIT_CODES = {BETTER: 0, NO_CHANGE: 0, WORSE: 1, INCOMPATIBLE: 2}
# Deltas are differences of means summed in different orders; a change smaller than this is no change.
EPSILON = 1e-9
TOP = 10  # regressions and improvements listed by name


@dataclass(frozen=True)
class ConfigChange:
    key: str
    base: Any
    cand: Any


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
class Flip:
    """A question whose gate metric crossed the success threshold between the runs."""

    query_id: str
    question: str | None
    retriever: str
    k: int
    metric: str
    base: float
    cand: float


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
    regressions: int
    improvements: int
    result: str  # better | worse | no significant change | undefined
    reasons: tuple[str, ...] = ()  # why the cell failed, or why it is undefined
    estimate: str = PAIRED  # calibrated: base, cand, delta, interval and p are of the calibrated means
    n_graded_base: int | None = None  # the grades each calibrated mean rests on
    n_graded_cand: int | None = None
    skipped: tuple[SkippedMetric, ...] = ()
    notes: tuple[str, ...] = ()  # for the reader: a metric passed over, a calibrated estimate not made


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
    regressions: tuple[Flip, ...]  # success -> failure in a cell whose change counts, largest drop first
    improvements: tuple[Flip, ...]  # failure -> success, largest gain first
    cells: tuple[GateCell, ...]
    all_regressions: int = field(default=0)  # flips in every cell, significant or not
    judges: tuple[JudgeTrust, ...] = ()  # each judge's agreement with the person's grades, where it has any

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
            "top_regressions": [asdict(f) for f in self.regressions[:TOP]],
            "top_improvements": [asdict(f) for f in self.improvements[:TOP]],
        })


def cell_record(c: GateCell) -> dict[str, Any]:
    record = asdict(c)
    record["reasons"] = "; ".join(c.reasons)
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
) -> Comparison:
    """Compare candidate `cand` with baseline `base` under `gate`, on every (retriever, k) both runs hold or those
    of `retrievers` / `ks`. `grading`: the person's grades of judged answers, which decide whether each judge is
    trusted and make the calibrated estimates of `gate.calibrated`; None: no grades."""
    options = {
        "ignore_invariants": ignore_invariants,
        "retrievers": list(retrievers) if retrievers is not None else None,
        "ks": list(ks) if ks is not None else None,
    }
    mismatches, warnings = _invariants(base, cand)
    incompatible: list[str] = []
    if ignore_invariants:
        warnings += [f"ignored: {m}" for m in mismatches]
    else:
        incompatible += mismatches

    pairs = _paired_values(base, cand)
    tests = _paired_tests(pairs, n_perm=n_perm, seed=seed, alpha=gate.alpha)
    deltas = _deltas(base, cand, tests)
    questions = {row["query_id"]: row.get("question") for run in (base, cand) for row in run.results}
    weights = {row["query_id"]: float(row.get("weight") or 1.0) for row in cand.results}
    grading = grading or Grading()
    graded = (graded_frame(base, grading), graded_frame(cand, grading))
    judges = judge_trust(pd.concat(graded, ignore_index=True), grading)

    cells, flips, diffs = [], [], []
    for (retriever, k), cell_pairs in pairs.groupby(["retriever", "k"], sort=True):
        if not all(chosen is None or value in chosen for value, chosen in
                   ((retriever, retrievers), (retriever, gate.retrievers), (k, ks))):
            continue
        cell, cell_diffs, cell_flips, cell_warnings = _judge_cell(
            str(retriever), int(k), cell_pairs, base, cand, weights, questions, gate, judges, graded, grading,
            n_perm=n_perm, seed=seed)
        cells.append(cell)
        diffs.append(cell_diffs)
        flips += cell_flips
        warnings += cell_warnings
    cells = _decide(cells, diffs, gate, n_perm=n_perm, seed=seed)
    counted = {(c.retriever, c.k) for c in cells if c.significant or not gate.significant_only}
    regressions = [f for f in flips if f.cand < f.base and (f.retriever, f.k) in counted]
    improvements = [f for f in flips if f.cand > f.base]
    regressions.sort(key=lambda f: (f.cand - f.base, f.retriever, f.k, f.query_id))
    improvements.sort(key=lambda f: (f.base - f.cand, f.retriever, f.k, f.query_id))

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
        config_changes=tuple(_config_changes(base.config, cand.config)),
        deltas=tuple(deltas),
        regressions=tuple(regressions),
        improvements=tuple(improvements),
        cells=tuple(cells),
        all_regressions=sum(1 for f in flips if f.cand < f.base),
        judges=tuple(judges.values()),
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
) -> tuple[GateCell, pd.Series | None, list[Flip], list[str]]:
    """The cell's metric, test, (weighted) differences by question (None for a calibrated test, which has none) and
    flips; its result is settled by _decide once every cell is tested."""
    both = pairs[pairs["base"].notna() & pairs["cand"].notna()]
    warnings: list[str] = []
    healthy = []
    for metric in set(both["metric"]):
        why = _unhealthy(base, cand, retriever, k, metric, gate.max_error_rate)
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
    threshold = success_threshold(metric)
    flips = [
        Flip(str(r.query_id), questions.get(r.query_id), retriever, k, metric, float(r.base), float(r.cand))
        for r in rows.itertuples(index=False)
        if (r.base >= threshold) != (r.cand >= threshold)
    ]
    counts = dict(regressions=sum(1 for f in flips if f.cand < f.base),
                  improvements=sum(1 for f in flips if f.cand > f.base), skipped=tuple(skipped))
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
            notes=tuple(notes), **counts)
        return cell, None, flips, warnings
    cell = _cell(
        retriever, k, metric,
        base=float(np.average(b, weights=w)), cand=float(np.average(c, weights=w)), delta=test.delta,
        ci_low=test.ci_low, ci_high=test.ci_high, n_pairs=test.n, p_value=_number(test.p_value),
        notes=tuple(notes), **counts,
    )
    return cell, pd.Series(terms, index=rows["query_id"].to_numpy()), flips, warnings


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
                           f"{interval_text(cell.ci_low, cell.ci_high)} "
                           f"is below min_delta {gate.min_delta} (p_adj {p_text(p_adj)})")
        if gate.max_regressions is not None and cell.regressions > gate.max_regressions and counts:
            reasons.append(f"{name}: {cell.regressions} regressions exceed max_regressions {gate.max_regressions}")
        result = WORSE if reasons else BETTER if significant and cell.delta > EPSILON else NO_CHANGE
        decided.append(replace(cell, p_adjusted=p_adj, significant=significant, result=result, reasons=tuple(reasons)))
    return decided


def metric_label(cell: GateCell) -> str:
    """The cell's metric, marked when its change is of the calibrated means."""
    return f"{cell.metric} (calibrated)" if cell.estimate == CALIBRATED else str(cell.metric)


def _unhealthy(base: Run, cand: Run, retriever: str, k: int, metric: str, limit: float) -> str | None:
    for run, role in ((base, "base"), (cand, "candidate")):
        why = unhealthy(run.metrics.get("call_health") or [], retriever, k, metric, limit)
        if why:
            return f"{why} in the {role} run"
    return None


def _invariants(base: Run, cand: Run) -> tuple[list[str], list[str]]:
    """Invariant mismatch messages, and warnings. Judge invariants apply only when both runs used a judge: a run
    without one has no judge metrics, so nothing judge-made is compared."""
    mismatches, warnings = [], []
    checks = list(DATASET_INVARIANTS)
    base_judge, cand_judge = (config_value(r.config, JUDGE_INVARIANTS[0][1]) for r in (base, cand))
    if base_judge is not None and cand_judge is not None:
        checks += JUDGE_INVARIANTS
    elif (base_judge is None) != (cand_judge is None):
        only = "base" if base_judge is not None else "candidate"
        warnings.append(f"only the {only} run used a judge: judge invariants not checked, judge metrics not compared")
    for name, key in checks:
        b, c = config_value(base.config, key), config_value(cand.config, key)
        if b != c:
            mismatches.append(f"invariant {name} ({key}) differs: base={b!r}, candidate={c!r}")
        elif b is None:
            warnings.append(f"invariant {name} ({key}) is recorded in neither run")
    return mismatches, warnings


def _paired_values(base: Run, cand: Run) -> pd.DataFrame:
    """query_id, retriever, k, metric, base, cand for every per-question value both runs hold (NaN kept)."""
    b = base.per_query_frame().rename(columns={"value": "base"})
    c = cand.per_query_frame().rename(columns={"value": "cand"})
    return b.merge(c, on=["query_id", "retriever", "k", "metric"]).sort_values(
        ["retriever", "k", "query_id"], kind="stable", ignore_index=True
    )


def _paired_tests(pairs: pd.DataFrame, *, n_perm: int, seed: int,
                  alpha: float) -> dict[tuple[str, int, str], PairedTest]:
    """The paired test of every (retriever, k, metric), all at once over a questions x cells matrix."""
    if pairs.empty:
        return {}
    keys = ["retriever", "k", "metric"]
    wide_base = pairs.pivot(index="query_id", columns=keys, values="base")
    wide_cand = pairs.pivot(index="query_id", columns=keys, values="cand").reindex(columns=wide_base.columns)
    tests = paired_tests(wide_base.to_numpy(), wide_cand.to_numpy(), n_perm=n_perm, seed=seed, alpha=alpha)
    return {(str(r), int(k), str(m)): test for (r, k, m), test in zip(wide_base.columns, tests)}


def _deltas(base: Run, cand: Run, tests: dict[tuple[str, int, str], PairedTest]) -> list[MetricDelta]:
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
        base_value, cand_value = _number(r.value_base), _number(r.value_cand)
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
                p_value=_number(test.p_value) if test else None,
                ci_low=_number(test.ci_low) if test else None,
                ci_high=_number(test.ci_high) if test else None,
            )
        )
    return deltas


def _config_changes(base: dict[str, Any], cand: dict[str, Any]) -> list[ConfigChange]:
    b, c = flatten(base), flatten(cand)
    keys = sorted(b.keys() | c.keys())
    return [ConfigChange(key, b.get(key), c.get(key)) for key in keys if b.get(key) != c.get(key)]


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if np.isnan(value) else value
