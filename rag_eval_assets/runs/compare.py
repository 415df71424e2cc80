"""Comparison of two runs and the quality gate (seed 000 section 7, seed 002 "Run Comparison Tool").

exit code 0: gate passed; 1: gate failed (a delta below min_delta, or more regressions than max_regressions);
2: the runs are incompatible (an invariant differs, or they share no retriever/k or lack the primary metric).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.reports.markdown import cell_text, markdown_table
from rag_eval_assets.runs.significance import PairedTest, paired_tests
from rag_eval_assets.runs.store import Run, config_value, flatten

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
WEIGHTED_SCORE = "weighted_score"
DEFAULT_PRIMARY_METRIC = "hit@k"
# Deltas are differences of means summed in different orders; a change smaller than this is no change.
EPSILON = 1e-9


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
    """A question whose primary metric crossed the success threshold between the runs."""

    query_id: str
    question: str | None
    retriever: str
    k: int
    base: float
    cand: float


@dataclass(frozen=True)
class GateCell:
    retriever: str
    k: int
    metric: str  # weighted_score when both runs have it for this cell, else the primary metric
    base: float
    cand: float
    delta: float
    p_value: float | None  # the primary metric's paired test in this cell
    regressions: int
    failures: tuple[str, ...]


@dataclass(frozen=True)
class Comparison:
    base_id: str
    cand_id: str
    options: dict[str, Any]
    incompatible: tuple[str, ...]
    warnings: tuple[str, ...]
    config_changes: tuple[ConfigChange, ...]
    deltas: tuple[MetricDelta, ...]
    regressions: tuple[Flip, ...]  # success -> failure, largest drop first
    improvements: tuple[Flip, ...]  # failure -> success, largest gain first
    gate: tuple[GateCell, ...]

    @property
    def failures(self) -> list[str]:
        return [failure for cell in self.gate for failure in cell.failures]

    @property
    def exit_code(self) -> int:
        if self.incompatible:
            return 2
        return 1 if self.failures else 0


def compare_runs(
    base: Run,
    cand: Run,
    *,
    min_delta: float = 0.0,
    max_regressions: int | None = None,
    ignore_invariants: bool = False,
    significant_only: bool = False,
    primary_metric: str = DEFAULT_PRIMARY_METRIC,
    success_threshold: float = 0.5,
    retrievers: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    alpha: float = 0.05,
    n_perm: int = 10000,
    seed: int = 0,
) -> Comparison:
    """Compare candidate `cand` with baseline `base`.

    A question succeeds when its `primary_metric` value is >= `success_threshold` (0.5 suits 0/1 metrics such as
    hit@k and seed 000's question_score; use e.g. 3 for 0-5 judge scores). The gate looks at every (retriever, k)
    both runs have, or those of `retrievers` / `ks`. In each, it fails when the delta of weighted_score (of the
    primary metric when a run has no weighted_score) is below `min_delta`, or when more than `max_regressions`
    questions flipped from success to failure. With `significant_only` a cell fails only when the paired sign-flip
    test of its primary metric gives p < `alpha`.
    """
    options = {
        "min_delta": min_delta,
        "max_regressions": max_regressions,
        "ignore_invariants": ignore_invariants,
        "significant_only": significant_only,
        "primary_metric": primary_metric,
        "success_threshold": success_threshold,
        "retrievers": list(retrievers) if retrievers is not None else None,
        "ks": list(ks) if ks is not None else None,
        "alpha": alpha,
    }
    mismatches, warnings = _invariants(base, cand)
    incompatible: list[str] = []
    if ignore_invariants:
        warnings += [f"ignored: {m}" for m in mismatches]
    else:
        incompatible += mismatches

    pairs = _paired_values(base, cand)
    tests = _paired_tests(pairs, n_perm=n_perm, seed=seed)
    deltas = _deltas(base, cand, tests)

    primary_missing = False
    for run, role in ((base, "base"), (cand, "candidate")):
        metrics = sorted({m for row in run.results for m in (row.get("metrics") or {})})
        if primary_metric not in metrics:
            primary_missing = True
            incompatible.append(
                f"primary metric {primary_metric!r} is not in the {role} run {run.run_id} "
                f"(per-question metrics: {', '.join(metrics) or 'none'})"
            )

    # A question without a value in one run (undefined there) neither regresses nor improves.
    primary = pairs[(pairs["metric"] == primary_metric) & pairs["base"].notna() & pairs["cand"].notna()]
    base_ok = primary["base"].to_numpy() >= success_threshold
    cand_ok = primary["cand"].to_numpy() >= success_threshold
    questions = {row["query_id"]: row.get("question") for run in (base, cand) for row in run.results}
    regressions = _flips(primary[base_ok & ~cand_ok], questions, ascending=True)
    improvements = _flips(primary[~base_ok & cand_ok], questions, ascending=False)

    gate = _gate(deltas, tests, regressions, options)
    if not gate and not primary_missing:
        incompatible.append(
            f"no retriever and k has {primary_metric!r} (or {WEIGHTED_SCORE!r}) in both runs' metrics"
            + (" among the retrievers / k selected" if retrievers is not None or ks is not None else "")
        )
    return Comparison(
        base_id=base.run_id,
        cand_id=cand.run_id,
        options=options,
        incompatible=tuple(incompatible),
        warnings=tuple(warnings),
        config_changes=tuple(_config_changes(base.config, cand.config)),
        deltas=tuple(deltas),
        regressions=tuple(regressions),
        improvements=tuple(improvements),
        gate=tuple(gate),
    )


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


def _paired_tests(pairs: pd.DataFrame, *, n_perm: int, seed: int) -> dict[tuple[str, int, str], PairedTest]:
    """The paired test of every (retriever, k, metric), all at once over a questions x cells matrix."""
    if pairs.empty:
        return {}
    keys = ["retriever", "k", "metric"]
    wide_base = pairs.pivot(index="query_id", columns=keys, values="base")
    wide_cand = pairs.pivot(index="query_id", columns=keys, values="cand").reindex(columns=wide_base.columns)
    tests = paired_tests(wide_base.to_numpy(), wide_cand.to_numpy(), n_perm=n_perm, seed=seed)
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
        test = tests.get((str(r.retriever), int(r.k), str(r.metric)))
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


def _flips(rows: pd.DataFrame, questions: dict[str, str | None], ascending: bool) -> list[Flip]:
    rows = rows.assign(change=rows["cand"] - rows["base"]).sort_values(
        ["change", "retriever", "k", "query_id"], ascending=[ascending, True, True, True], kind="stable"
    )
    return [
        Flip(str(r.query_id), questions.get(r.query_id), str(r.retriever), int(r.k), float(r.base), float(r.cand))
        for r in rows.itertuples(index=False)
    ]


def _gate(
    deltas: list[MetricDelta],
    tests: dict[tuple[str, int, str], PairedTest],
    regressions: list[Flip],
    options: dict[str, Any],
) -> list[GateCell]:
    retrievers, ks, primary_metric = options["retrievers"], options["ks"], options["primary_metric"]
    by_cell: dict[tuple[str, int], dict[str, MetricDelta]] = {}
    for d in deltas:
        if d.delta is not None:
            by_cell.setdefault((d.retriever, d.k), {})[d.metric] = d
    cells = []
    for (retriever, k), metrics in by_cell.items():
        if (retrievers is not None and retriever not in retrievers) or (ks is not None and k not in ks):
            continue
        chosen = metrics.get(WEIGHTED_SCORE) or metrics.get(primary_metric)
        if chosen is None:
            continue
        test = tests.get((retriever, k, primary_metric))
        p_value = _number(test.p_value) if test else None
        significant = p_value is not None and p_value < options["alpha"]
        counted = not options["significant_only"] or significant
        n_regressions = sum(1 for f in regressions if f.retriever == retriever and f.k == k)
        failures = []
        if chosen.delta < options["min_delta"] - EPSILON and counted:
            failures.append(
                f"{retriever}@{k}: {chosen.metric} delta {chosen.delta:+.4f} is below min_delta {options['min_delta']}"
            )
        limit = options["max_regressions"]
        if limit is not None and n_regressions > limit and counted:
            failures.append(f"{retriever}@{k}: {n_regressions} regressions exceed max_regressions {limit}")
        cells.append(
            GateCell(retriever, k, chosen.metric, chosen.base, chosen.cand, chosen.delta, p_value, n_regressions,
                     tuple(failures))
        )
    return cells


def _config_changes(base: dict[str, Any], cand: dict[str, Any]) -> list[ConfigChange]:
    b, c = flatten(base), flatten(cand)
    keys = sorted(b.keys() | c.keys())
    return [ConfigChange(key, b.get(key), c.get(key)) for key in keys if b.get(key) != c.get(key)]


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if np.isnan(value) else value


def _verdict(c: Comparison) -> str:
    if c.exit_code == 2:
        return "INCOMPATIBLE (exit 2)"
    return "FAILED (exit 1)" if c.exit_code == 1 else "PASSED (exit 0)"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.4f}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _value(value: Any) -> str:
    return "<absent>" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _delta_rows(c: Comparison) -> list[list[str]]:
    return [
        [d.retriever, str(d.k), d.metric, cell_text(d.base, 4), cell_text(d.cand, 4), _signed(d.delta),
         str(d.n_pairs), _p(d.p_value)]
        for d in c.deltas
    ]


def _flip_rows(flips: Sequence[Flip], top: int) -> list[list[str]]:
    return [
        [f"{f.retriever}@{f.k}", f.query_id, f"{f.base:.3f} -> {f.cand:.3f}", (f.question or "").replace("\n", " ")]
        for f in flips[:top]
    ]


def _gate_rows(c: Comparison) -> list[list[str]]:
    return [
        [f"{g.retriever}@{g.k}", g.metric, f"{g.base:.4f}", f"{g.cand:.4f}", _signed(g.delta), _p(g.p_value),
         str(g.regressions), "; ".join(g.failures) or "ok"]
        for g in c.gate
    ]


DELTA_HEADERS = ["retriever", "k", "metric", "base", "cand", "delta", "pairs", "p"]
FLIP_HEADERS = ["cell", "query_id", "change", "question"]
GATE_HEADERS = ["cell", "metric", "base", "cand", "delta", "p", "regressions", "result"]


def format_comparison(c: Comparison, top: int = 10) -> str:
    """The comparison as terminal text."""
    metric, threshold = c.options["primary_metric"], c.options["success_threshold"]
    lines = [f"Comparing candidate {c.cand_id} with base {c.base_id}: {_verdict(c)}"]
    if c.incompatible:
        lines += ["", "Incompatible runs:"] + [f"  - {m}" for m in c.incompatible]
    if c.warnings:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in c.warnings]
    lines += ["", f"Configuration differences ({len(c.config_changes)}):"]
    lines += [f"  {ch.key}: {_value(ch.base)} -> {_value(ch.cand)}" for ch in c.config_changes] or ["  none"]
    lines += ["", "Metric deltas (slice all; p: paired sign-flip test over the questions both runs scored):"]
    lines += _text_table(DELTA_HEADERS, _delta_rows(c))
    for title, flips in (("regressions", c.regressions), ("improvements", c.improvements)):
        lines += ["", f"Top {title} ({len(flips)} in all; success = {metric} >= {threshold}):"]
        lines += _text_table(FLIP_HEADERS, _flip_rows(flips, top)) if flips else ["  none"]
    lines += ["", _gate_line(c)]
    lines += _text_table(GATE_HEADERS, _gate_rows(c)) if c.gate else ["  no cell to gate"]
    return "\n".join(lines) + "\n"


def comparison_markdown(c: Comparison, top: int = 10) -> str:
    """The comparison as Markdown (summary.md, Dagster metadata, PR comments)."""
    metric, threshold = c.options["primary_metric"], c.options["success_threshold"]
    parts = [f"**{_verdict(c)}**: candidate `{c.cand_id}` against base `{c.base_id}`."]
    if c.incompatible:
        parts.append("Incompatible runs:\n\n" + "\n".join(f"- {m}" for m in c.incompatible))
    if c.warnings:
        parts.append("Warnings:\n\n" + "\n".join(f"- {w}" for w in c.warnings))
    parts.append(f"### Configuration differences ({len(c.config_changes)})")
    changes = [[ch.key, _value(ch.base), _value(ch.cand)] for ch in c.config_changes]
    parts.append(markdown_table(["key", "base", "candidate"], changes) if changes else "none")
    parts += ["### Metric deltas", markdown_table(DELTA_HEADERS, _delta_rows(c)) if c.deltas else "none"]
    for title, flips in (("regressions", c.regressions), ("improvements", c.improvements)):
        parts.append(f"### Top {title} ({len(flips)} in all; success = {metric} >= {threshold})")
        parts.append(markdown_table(FLIP_HEADERS, _flip_rows(flips, top)) if flips else "none")
    parts += ["### Gate", _gate_line(c), markdown_table(GATE_HEADERS, _gate_rows(c)) if c.gate else "no cell to gate"]
    return "\n\n".join(parts) + "\n"


def _gate_line(c: Comparison) -> str:
    o = c.options
    return (
        f"Gate: min_delta={o['min_delta']}, max_regressions={o['max_regressions']}, "
        f"significant_only={o['significant_only']} (alpha {o['alpha']})"
    )


def _text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, except the last (question text, result), so that no line ends in
    padding."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  " + "  ".join(str(v).ljust(w) for v, w in zip(cells[:-1], widths[:-1])) + "  " + str(cells[-1])

    return [line(headers)] + [line(r) for r in rows]
