"""Comparisons as text: the verdict line, the terminal report, Markdown, and the rows they share; a comparison.json
record as a table (the run_comparison asset's) and its checks' descriptions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd

from rag_eval_assets.reports.evidence import evidence_markdown, evidence_text
from rag_eval_assets.reports.markdown import capped_table, cell_text, markdown_table, text_table
from rag_eval_assets.verdict.compare import (
    CALIBRATED,
    INCOMPATIBLE,
    UNDEFINED,
    WORSE,
    Comparison,
    GateCell,
    cell_record,
    metric_label,
)
from rag_eval_assets.verdict.evidence import QuestionChange, evidence_record
from rag_eval_assets.verdict.text import graded_n, interval_text, p_text, signed


def verdict_line(c: Comparison) -> str:
    """The first line a person reads: the verdict, what it rests on, the exit code."""
    head = f"Verdict: {c.verdict.upper()} (exit {c.exit_code}): candidate {c.cand_id} against base {c.base_id}"
    if c.verdict == INCOMPATIBLE:
        return f"{head}; {c.incompatible[0]}"
    deciding = c.deciding_cells
    if not deciding:
        judged = [cell for cell in c.cells if cell.result != UNDEFINED]
        return f"{head}; no cell of {len(judged)} changed significantly (alpha {c.gate.alpha}, {c.gate.correction})"
    return f"{head}; decided by " + ", ".join(_cell_summary(cell) for cell in deciding)


def recorded_verdict(comparison: dict[str, Any]) -> str:
    """One line from a comparison.json record: "worse against run X (exit 1; decided by bm25@5, bm25@10)"."""
    deciding = ", ".join(comparison["deciding_cells"]) or "none"
    return (f"{comparison['verdict']} against run {comparison['base_run_id']} "
            f"(exit {comparison['exit_code']}; decided by {deciding})")


def _cell_summary(c: GateCell) -> str:
    n = "" if c.estimate != CALIBRATED else \
        f", {graded_n(c.n_graded_base, c.n_answers_base, c.n_graded_cand, c.n_answers_cand)}"
    return (f"{c.retriever}@{c.k} {metric_label(c)} {c.base:.3f} -> {c.cand:.3f} ({signed(c.delta, 3)} "
            f"{interval_text(c.ci_low, c.ci_high, 3)}{n}, p_adj {p_text(c.p_adjusted)})")


def _value(value: Any) -> str:
    return "<absent>" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


GATE_HEADERS = ["cell", "metric", "base", "cand", "delta", "95% CI", "p", "p_adj", "questions down / up", "result"]
DELTA_HEADERS = ["retriever", "k", "metric", "base", "cand", "delta", "95% CI", "pairs", "p"]
CHANGE_HEADERS = ["cell", "metric", "query_id", "change", "flip", "question"]


def gate_rows(cells: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Rows of GATE_HEADERS from cell records (cell_record, or comparison.json's `cells`), in their order."""
    return [
        [f"{g['retriever']}@{g['k']}", _metric_text(g), cell_text(g["base"], 4), cell_text(g["cand"], 4),
         signed(g["delta"]), interval_text(g["ci_low"], g["ci_high"], tested=g["p_value"] is not None), p_text(g["p_value"]), p_text(g["p_adjusted"]),
         _moved_text(g), g["result"] + (f": {g['reasons']}" if g["result"] == UNDEFINED else "")]
        for g in cells
    ]


def _moved_text(g: dict[str, Any]) -> str:
    # Records written before drops and gains were counted have only the flips.
    if "drops" not in g:
        return f"{g['regressions']} flips down"
    return f"{g['drops']} / {g['gains']}"


def gate_groups(cells: Sequence[dict[str, Any]],
                deciding: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Cell records in the order a person reads them: the cells that decided the verdict, those that moved (or are
    undefined) without deciding, and those identical in both runs (no question moved)."""
    first = [g for g in cells if _name(g) in deciding]
    identical = [g for g in cells if g.get("identical") and _name(g) not in deciding]
    return first, [g for g in cells if g not in first and g not in identical], identical


def identical_line(cells: Sequence[dict[str, Any]], identical: Sequence[dict[str, Any]]) -> str:
    """"12 cells identical: bm25@1-20, bm25_a@1-20": per retriever its identical ks, runs of consecutive ks of the
    retriever's own (among `cells`) written first-last."""
    names = []
    for retriever in dict.fromkeys(g["retriever"] for g in identical):
        ks = sorted(g["k"] for g in cells if g["retriever"] == retriever)
        same = {g["k"] for g in identical if g["retriever"] == retriever}
        runs: list[list[int]] = []
        for i, k in enumerate(ks):
            if k not in same:
                continue
            if runs and ks.index(runs[-1][-1]) == i - 1:
                runs[-1].append(k)
            else:
                runs.append([k])
        names.append(f"{retriever}@" + ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs))
    return f"{len(identical)} cell{'s' if len(identical) != 1 else ''} identical: {', '.join(names)}"


def _name(g: dict[str, Any]) -> str:
    return f"{g['retriever']}@{g['k']}"


def gate_table_markdown(cells: Sequence[dict[str, Any]], deciding: Sequence[str]) -> str:
    """The gate table, deciding cells first, then the moved ones, then one line for the identical ones."""
    first, moved, identical = gate_groups(cells, deciding)
    table = markdown_table(GATE_HEADERS, gate_rows(first + moved)) if first or moved else ""
    line = f"_{identical_line(cells, identical)}_" if identical else ""
    return "\n\n".join(part for part in (table, line) if part) or "none"


def _metric_text(g: dict[str, Any]) -> str:
    # Records written before calibrated estimates have no `estimate`: theirs are all paired.
    if g["metric"] is None:
        return "—"
    return g["metric"] + (" (calibrated)" if g.get("estimate") == CALIBRATED else "")


def gate_notes(cells: Sequence[dict[str, Any]]) -> list[str]:
    """What the reader must know about how cells were judged (from cell records): a judge metric passed over
    because its judge is not trusted, a calibrated estimate not made, and the grades a calibrated one rests on."""
    notes = []
    for g in cells:
        if g.get("estimate") == CALIBRATED:
            notes.append(f"{g['retriever']}@{g['k']}: {g['metric']} calibrated by the person's grades: "
                         f"{g['base']:.2f} -> {g['cand']:.2f}, {signed(g['delta'], 2)} "
                         f"{interval_text(g['ci_low'], g['ci_high'], 2)}, "
                         + graded_n(g["n_graded_base"], g.get("n_answers_base"), g["n_graded_cand"],
                                    g.get("n_answers_cand")))
        notes += g.get("notes") or []
    return notes


def notes_markdown(cells: Sequence[dict[str, Any]]) -> str:
    """gate_notes as a Markdown list to put after the gate table ("" when there is none)."""
    return "".join(f"\n\n- {note}" if i == 0 else f"\n- {note}" for i, note in enumerate(gate_notes(cells)))


def delta_rows(deltas: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Rows of DELTA_HEADERS from MetricDelta records (comparison.json's `deltas`)."""
    return [
        [d["retriever"], str(d["k"]), d["metric"], cell_text(d["base"], 4), cell_text(d["cand"], 4),
         signed(d["delta"]), interval_text(d["ci_low"], d["ci_high"], tested=d["p_value"] is not None), str(d["n_pairs"]), p_text(d["p_value"])]
        for d in deltas
    ]


def change_rows(changes: Sequence[QuestionChange], top: int) -> list[list[str]]:
    return [
        [f"{f.retriever}@{f.k}", f.metric, f.query_id, f"{f.base:.3f} -> {f.cand:.3f}",
         ("success -> failure" if f.diff < 0 else "failure -> success") if f.flip else "",
         (f.question or "").replace("\n", " ")]
        for f in changes[:top]
    ]


def _changes_title(c: Comparison, title: str, changes: Sequence[QuestionChange], every: int) -> str:
    flips = sum(1 for f in changes if f.flip)
    where = "significant cells" if c.gate.significant_only else "judged cells"
    return (f"Top {title} ({len(changes)} in the {where}, {flips} of them flips; {every} across all cells), "
            f"on each cell's gate metric")


def gate_settings_line(g: dict[str, Any]) -> str:
    return (
        f"Gate: metric={g['metric']} (retrieval fallback {g['retrieval_metric']}), min_delta={g['min_delta']}, "
        f"max_regressions={g['max_regressions']}, alpha={g['alpha']}, correction={g['correction']}, "
        f"significant_only={g['significant_only']}, max_error_rate={g['max_error_rate']}, "
        f"retrievers={', '.join(g['retrievers']) if g.get('retrievers') else 'all'}, "
        f"calibrated={g.get('calibrated', False)}"
    )


def format_comparison(c: Comparison) -> str:
    """The comparison as terminal text: the verdict, the gate table (deciding cells first, identical ones on one
    line), the questions that moved each deciding cell most, then the regressions and improvements."""
    lines = [verdict_line(c)]
    if c.incompatible:
        lines += ["", "Incompatible runs:"] + [f"  - {m}" for m in c.incompatible]
    if c.warnings:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in c.warnings]
    lines += ["", gate_settings_line(c.gate.model_dump())]
    records = [cell_record(x) for x in c.cells]
    first, moved, identical = gate_groups(records, [x.name for x in c.deciding_cells])
    lines += text_table(GATE_HEADERS, gate_rows(first + moved)) if first or moved else []
    lines += [f"  {identical_line(records, identical)}"] if identical else []
    lines += [] if c.cells else ["  no cell to gate"]
    for cell in c.cells:
        lines += [f"  - {reason}" for reason in cell.reasons if cell.result == WORSE]
    lines += [f"  * {note}" for note in gate_notes(records)]
    for e in _deciding_evidence(c):
        lines += ["", "Evidence: " + evidence_text(e)[0], *evidence_text(e)[1:]]
    top = c.gate.top_questions
    for title, changes, every in (("regressions", c.regressions, c.all_regressions),
                                  ("improvements", c.improvements, c.all_improvements)):
        lines += ["", _changes_title(c, title, changes, every) + ":"]
        lines += text_table(CHANGE_HEADERS, change_rows(changes, top)) if changes else ["  none"]
    lines += ["", f"Configuration differences ({len(c.config_changes)}):"]
    lines += [f"  {ch.key}: {_value(ch.base)} -> {_value(ch.cand)}" for ch in c.config_changes] or ["  none"]
    lines += ["", "Metric deltas (slice all; paired over the questions both runs scored):"]
    lines += text_table(DELTA_HEADERS, delta_rows([asdict(d) for d in c.deltas]))
    return "\n".join(lines) + "\n"


def format_explained(c: Comparison, cell: str) -> str:
    """One cell's evidence in full (`rag-eval compare --explain CELL`): the verdict, the cell's gate row, its
    questions, and each question's retrieved lists side by side."""
    (e,) = [e for e in map(evidence_record, c.evidence) if f"{e['retriever']}@{e['k']}" == cell]
    (record,) = [cell_record(x) for x in c.cells if x.name == cell]
    lines = [verdict_line(c), "", *text_table(GATE_HEADERS, gate_rows([record])), "", *evidence_text(e, full=True)]
    return "\n".join(lines) + "\n"


def _deciding_evidence(c: Comparison) -> list[dict[str, Any]]:
    deciding = {x.name for x in c.deciding_cells}
    return [e for e in map(evidence_record, c.evidence) if f"{e['retriever']}@{e['k']}" in deciding]


def comparison_markdown(c: Comparison, *, max_rows: int | None = None, where: str = "") -> str:
    """The comparison as Markdown, the verdict and the gate table first, then the evidence of each deciding cell
    (its questions, each with both retrieved lists). With `max_rows`, the long tables (metric deltas, configuration
    differences) stop there with a line saying how many rows are left in `where`."""
    parts = [f"**{verdict_line(c)}**"]
    if c.incompatible:
        parts.append("Incompatible runs:\n\n" + "\n".join(f"- {m}" for m in c.incompatible))
    if c.warnings:
        parts.append("Warnings:\n\n" + "\n".join(f"- {w}" for w in c.warnings))
    records = [cell_record(x) for x in c.cells]
    parts += ["### Gate", gate_settings_line(c.gate.model_dump()),
              (gate_table_markdown(records, [x.name for x in c.deciding_cells]) if c.cells else "none")
              + notes_markdown(records)]
    for e in _deciding_evidence(c):
        parts.append(evidence_markdown(e, "### Evidence:", full=True))
    top = c.gate.top_questions
    for title, changes, every in (("regressions", c.regressions, c.all_regressions),
                                  ("improvements", c.improvements, c.all_improvements)):
        parts.append(f"### {_changes_title(c, title, changes, every)}")
        parts.append(markdown_table(CHANGE_HEADERS, change_rows(changes, top)) if changes else "none")
    changes = [[ch.key, _value(ch.base), _value(ch.cand)] for ch in c.config_changes]
    parts.append(f"### Configuration differences ({len(changes)})")
    parts.append(capped_table(["key", "base", "candidate"], changes, max_rows, where) if changes else "none")
    parts += ["### Metric deltas", capped_table(DELTA_HEADERS, delta_rows([asdict(d) for d in c.deltas]), max_rows, where) if c.deltas else "none"]
    return "\n\n".join(parts) + "\n"


def evidence_metadata(comparison: dict[str, Any]) -> str:
    """The deciding cells' question tables as Markdown (the UI's run_comparison and evaluation_run metadata)."""
    deciding = set(comparison.get("deciding_cells") or [])
    parts = [evidence_markdown(e, "####") for e in comparison.get("evidence") or []
             if f"{e['retriever']}@{e['k']}" in deciding]
    return "\n\n".join(parts) or "_no cell decided the verdict_"


COMPARISON_COLUMNS = ("retriever", "k", "metric", "gate", "base", "cand", "delta", "ci_low", "ci_high", "n_pairs",
                      "p_value", "p_adjusted", "significant", "regressions", "result", "reasons")


def comparison_frame(comparison: dict[str, Any]) -> pd.DataFrame:
    """Every metric delta of comparison.json, the gate cells' own rows marked gate = true with their result."""
    cells = {(c["retriever"], c["k"]): c for c in comparison["cells"]}
    rows = []
    for d in comparison["deltas"]:
        cell = cells.get((d["retriever"], d["k"]))
        is_gate = cell is not None and cell["metric"] == d["metric"]
        rows.append({
            **{key: d[key] for key in ("retriever", "k", "metric", "base", "cand", "delta", "ci_low", "ci_high",
                                       "n_pairs", "p_value")},
            "gate": is_gate,
            "p_adjusted": cell["p_adjusted"] if is_gate else None,
            "significant": bool(cell["significant"]) if is_gate else None,
            "regressions": cell["regressions"] if is_gate else None,
            "result": cell["result"] if is_gate else None,
            "reasons": cell["reasons"] if is_gate else None,
        })
    table = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    return table.astype({"k": "int64", "base": "float64", "cand": "float64", "delta": "float64",
                         "ci_low": "float64", "ci_high": "float64", "p_value": "float64", "p_adjusted": "float64",
                         "regressions": "Int64", "significant": "boolean", "gate": "bool"})


def quality_gate_description(comparison: dict[str, Any]) -> str:
    """Why a comparison.json record's quality gate passed or failed, at most 2000 characters (a check's text)."""
    verdict = comparison["verdict"]
    if verdict == INCOMPATIBLE:
        text = f"not judged: the runs are incompatible ({'; '.join(comparison['incompatible'])})"
    elif verdict == WORSE:
        text = "worse: " + "; ".join(c["reasons"] for c in comparison["cells"] if c["result"] == WORSE)
    else:
        text = f"{verdict} against {comparison['base_run_id']}"
    return text[:2000]
