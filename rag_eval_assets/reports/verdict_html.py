"""The report's verdict section from a comparison.json record: the verdict, the gate table (deciding cells first,
then the cells that moved, the identical ones folded into one expandable line), one section per deciding cell with
its questions (sortable by difference, each expandable to both runs' retrieved lists side by side), then the
regressions and improvements. Offline: inline CSS and script, nothing fetched."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from rag_eval_assets.reports.comparison import GATE_HEADERS, gate_groups, gate_notes, gate_rows, identical_line
from rag_eval_assets.reports.evidence import (
    QUESTION_HEADERS,
    SIDE_HEADERS,
    answer_lines,
    evidence_title,
    gold_text,
    question_rows,
    side_by_side_rows,
)
from rag_eval_assets.verdict.evidence import WORSE_FIRST

VERDICT_CSS = """
.verdict { font-size: 1.3rem; font-weight: 700; padding: .6rem 1rem; border-radius: .3rem; }
.verdict-worse, .result-worse { background: #fbe3e3; color: #8a1010; }
.verdict-better, .result-better { background: #e2f4e4; color: #145c1e; }
.verdict-none, .verdict-no-significant-change { background: #eef1f6; color: #2c3e5a; }
.verdict-incompatible, .result-undefined { background: #fff1d6; color: #7a4b00; }
th[data-sort] { cursor: pointer; text-decoration: underline dotted; }
button.toggle { font: inherit; cursor: pointer; }
td.gold { background: #fff6cc; font-weight: 600; }
"""
# Sorting moves whole questions (a tbody: its summary row and its lists), so an opened question stays open.
SCRIPT = """
document.querySelectorAll('section.evidence').forEach(function (section) {
  var table = section.querySelector('table.questions');
  var header = table.querySelector('th[data-sort]');
  header.addEventListener('click', function () {
    var ascending = header.getAttribute('aria-sort') !== 'ascending';
    var bodies = Array.prototype.slice.call(table.querySelectorAll('tbody.question'));
    bodies.sort(function (a, b) {
      var d = parseFloat(a.dataset.diff) - parseFloat(b.dataset.diff);
      return ascending ? d : -d;
    });
    bodies.forEach(function (body) { table.appendChild(body); });
    header.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
  });
  section.querySelectorAll('button.toggle').forEach(function (button) {
    button.addEventListener('click', function () {
      var lists = button.closest('tbody').querySelector('tr.lists');
      lists.hidden = !lists.hidden;
      button.setAttribute('aria-expanded', String(!lists.hidden));
    });
  });
});
"""
CHANGE_COLUMNS = ["cell", "metric", "query_id", "change", "flip", "question"]


def verdict_section(comparison: Mapping[str, Any] | None) -> str:
    head = '<section id="verdict"><h2>Verdict against the baseline</h2>'
    if comparison is None:
        return (head + '<p class="verdict verdict-none">No baseline run yet: this run is the first of its evalset '
                "and becomes the baseline of the next.</p></section>")
    verdict = comparison["verdict"]
    deciding = comparison.get("deciding_cells") or []
    parts = [
        head,
        f'<p class="verdict verdict-{verdict.replace(" ", "-")}" data-verdict="{_e(verdict)}">{_e(verdict.upper())} '
        f"against run {_e(comparison['base_run_id'])} (exit {comparison['exit_code']})</p>",
        f"<p>Cells that decided it: {_e(', '.join(deciding) or 'none')}. Gate: {_e(_gate_text(comparison['gate']))}.</p>",
    ]
    if comparison.get("incompatible"):
        parts.append("<ul>" + "".join(f"<li>{_e(m)}</li>" for m in comparison["incompatible"]) + "</ul>")
    cells = comparison["cells"]
    first, moved, identical = gate_groups(cells, deciding)
    parts.append(_gate_table("gate-cells", first + moved))
    if identical:
        parts.append(f'<details id="identical-cells"><summary>{_e(identical_line(cells, identical))}</summary>'
                     f'{_gate_table("identical-cell-table", identical)}</details>')
    notes = gate_notes(cells)  # as summary.md has them under its gate table
    if notes:
        parts.append('<ul id="gate-notes">' + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>")
    for e in comparison.get("evidence") or []:
        if f"{e['retriever']}@{e['k']}" in deciding:
            parts.append(_evidence_section(e))
    for title, key, total in (("Top regressions", "top_regressions", "regressions"),
                              ("Top improvements", "top_improvements", "improvements")):
        changes = comparison.get(key) or []
        parts.append(f"<h3>{title} ({comparison.get(total, len(changes))} in the cells whose change counts)</h3>")
        parts.append(_changes_table(changes) if changes else "<p>none</p>")
    return "".join(parts) + f"<script>{SCRIPT}</script></section>"


def _gate_table(table_id: str, cells: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        f'<tr class="result-{cell["result"].replace(" ", "-")}">' + "".join(
            f'<td{"" if i in (0, 1, len(GATE_HEADERS) - 1) else " class=num"}>{_e(text)}</td>'
            for i, text in enumerate(texts)
        ) + "</tr>"
        for cell, texts in zip(cells, gate_rows(cells))
    ]
    return (f'<div class="scroll"><table id="{table_id}"><thead><tr>'
            + "".join(f"<th>{_e(h)}</th>" for h in GATE_HEADERS) + f"</tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table></div>")


def _evidence_section(e: Mapping[str, Any]) -> str:
    name = f"{e['retriever']}@{e['k']}"
    diff_column = QUESTION_HEADERS.index("diff")
    sort = "ascending" if e["order"] == WORSE_FIRST else "descending"
    head = "".join(
        f'<th data-sort="diff" aria-sort="{sort}" title="sort by difference">{_e(h)}</th>' if i == diff_column
        else f"<th>{_e(h)}</th>" for i, h in enumerate(QUESTION_HEADERS))
    bodies = []
    for q, texts in zip(e["questions"], question_rows(e)):
        query_id = q["change"]["query_id"]
        cells = [f'<td><button class="toggle" aria-expanded="false" title="what each run retrieved">'
                 f"{_e(texts[0])}</button></td>"]
        cells += [f'<td{" class=num" if 1 <= i <= 3 else ""}>{_e(t)}</td>' for i, t in enumerate(texts) if i]
        bodies.append(
            f'<tbody class="question" data-query="{_e(query_id)}" data-diff="{q["change"]["diff"]!r}">'
            f'<tr class="summary">{"".join(cells)}</tr>'
            f'<tr class="lists" hidden><td colspan="{len(QUESTION_HEADERS)}">{_lists(q, e["k"])}</td></tr></tbody>')
    return (f'<section class="evidence" id="evidence-{_e(name.replace("@", "-"))}" data-cell="{_e(name)}">'
            f"<h3>Evidence: {_e(evidence_title(e))}</h3><div class=\"scroll\"><table class=\"questions\">"
            f"<thead><tr>{head}</tr></thead>{''.join(bodies)}</table></div></section>")


def _lists(q: Mapping[str, Any], k: int) -> str:
    """Both runs' retrieved lists rank by rank, a rank holding a gold item of either run marked."""
    rows = []
    for row, base, cand in zip(side_by_side_rows(q), _padded(q["base_retrieved"], k), _padded(q["cand_retrieved"], k)):
        gold = {side: item is not None and item["gold"] for side, item in (("base", base), ("cand", cand))}
        marks = " ".join(f"gold-{side}" for side, g in gold.items() if g)
        cls = f' class="gold {marks}"' if marks else ""
        # Only the side whose item is gold is highlighted: the other run's item at that rank may be anything.
        side = {1: "base", 2: "base", 3: "cand", 4: "cand"}
        rows.append(f"<tr{cls}>" + "".join(
            f'<td{" class=gold" if gold.get(side.get(i)) else ""}>{_e(v)}</td>' for i, v in enumerate(row)) + "</tr>")
    answers = "".join(f"<p>{_e(line)}</p>" for line in answer_lines(q))
    return (f'<p class="gold-ranks">gold rank base → cand: {_e(gold_text(q, k))}</p>'
            '<table class="side-by-side"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in SIDE_HEADERS)
            + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{answers}")


def _padded(items: Sequence[Mapping[str, Any]], k: int) -> list[Mapping[str, Any] | None]:
    return list(items) + [None] * max(0, k - len(items))


def _changes_table(changes: Sequence[Mapping[str, Any]]) -> str:
    body = "".join(
        f"<tr><td>{_e(f['retriever'])}@{f['k']}</td><td>{_e(f['metric'])}</td><td>{_e(f['query_id'])}</td>"
        f"<td class=\"num\">{f['base']:.3f} → {f['cand']:.3f}</td><td>{_e(_flip(f))}</td><td>{_e(f['question'])}</td></tr>"
        for f in changes
    )
    head = "".join(f"<th>{_e(h)}</th>" for h in CHANGE_COLUMNS)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _flip(change: Mapping[str, Any]) -> str:
    if not change.get("flip", True):
        return ""
    return "success → failure" if change["cand"] < change["base"] else "failure → success"


def _gate_text(gate: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in gate.items())


def _e(value: Any) -> str:
    return html.escape("—" if value is None else str(value))
