"""One question of a run in full (`rag-eval show RUN --question ID [--against RUN]`): per retriever what it
retrieved at its largest k (the lists at smaller k are its first k), gold items marked with their ranks, the
question's metrics at every k and the answers; against another run, both side by side."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from rag_eval_assets.reports.evidence import SIDE_HEADERS, answer_lines, gold_text, side_by_side_rows
from rag_eval_assets.reports.markdown import text_table
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.evidence import QuestionChange, question_evidence


def format_question(run: Run, query_id: str, against: Run | None = None) -> str:
    """The question's rows of `run` (the candidate side) beside those of `against` (the base side, when given);
    KeyError naming the run when neither run has the question."""
    rows = {(r["retriever"], int(r["k"])): r for r in run.results if r["query_id"] == query_id}
    other = {} if against is None else {(r["retriever"], int(r["k"])): r for r in against.results
                                        if r["query_id"] == query_id}
    if not rows and not other:
        where = run.run_id if against is None else f"{run.run_id} nor {against.run_id}"
        raise KeyError(f"no question {query_id!r} in run {where}")
    any_row = next(iter(rows.values()), None) or next(iter(other.values()))
    base_name = against.run_id if against is not None else "—"
    lines = [f"Question {query_id}: {any_row.get('question') or ''}",
             f"run {run.run_id}" + (f" against run {against.run_id}" if against is not None else "")]
    for retriever in sorted({r for r, _ in rows} | {r for r, _ in other}):
        ks = sorted({k for r, k in rows if r == retriever} | {k for r, k in other if r == retriever})
        k = ks[-1]
        change = QuestionChange(query_id, any_row.get("question"), retriever, k, "", 0.0, 0.0, False)
        q = asdict(question_evidence(change, other.get((retriever, k)) or {}, rows.get((retriever, k)) or {}, True))
        headers = [h.replace("base", base_name).replace("cand", run.run_id) for h in SIDE_HEADERS]
        lines += ["", f"{retriever}@{k}: gold rank {base_name} → {run.run_id}: {gold_text(q, k)}"]
        lines += text_table(headers, side_by_side_rows(q))
        for at in ks:
            lines.append(f"  k={at}: " + _metrics_line(other.get((retriever, at)), rows.get((retriever, at))))
            answered = asdict(question_evidence(change, other.get((retriever, at)) or {},
                                                rows.get((retriever, at)) or {}, True))
            lines += [f"    {line}" for line in answer_lines(answered)]
    return "\n".join(lines) + "\n"


def _metrics_line(base: Mapping[str, Any] | None, cand: Mapping[str, Any] | None) -> str:
    b, c = (base or {}).get("metrics") or {}, (cand or {}).get("metrics") or {}
    parts = []
    for name in dict.fromkeys([*b, *c]):
        parts.append(f"{name} {_value(b.get(name))} → {_value(c.get(name))}" if base is not None
                     else f"{name} {_value(c.get(name))}")
    return ", ".join(parts) or "no metrics"


def _value(value: Any) -> str:
    return "—" if value is None else f"{float(value):.4f}"
