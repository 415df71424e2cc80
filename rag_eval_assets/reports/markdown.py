"""Markdown tables (the metric summary shown in Dagster metadata, summary.md and comparison reports) and the same
tables as terminal text."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured table; cells are shown with `cell_text`."""
    lines = ["| " + " | ".join(_escape(str(h)) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_escape(cell_text(c)) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def capped_table(headers: Sequence[str], rows: Sequence[Sequence[object]], max_rows: int | None, where: str) -> str:
    """markdown_table of the first `max_rows` rows (all with None), then a line naming how many more rows `where`
    (a file) holds: a preview is cut between rows, never inside one."""
    if max_rows is None or len(rows) <= max_rows:
        return markdown_table(headers, rows)
    return markdown_table(headers, rows[:max_rows]) + f"\n\n_… {len(rows) - max_rows} more rows in {where}_"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A table as terminal lines: columns padded to their widest cell, except the last (question text, result),
    so that no line ends in padding."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  " + "  ".join(str(v).ljust(w) for v, w in zip(cells[:-1], widths[:-1])) + "  " + str(cells[-1])

    return [line(headers)] + [line(r) for r in rows]


def cell_text(value: object, digits: int = 3) -> str:
    """Floats to `digits` decimals, missing values (None, NaN) as an em dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def metric_pivot(
    aggregate: pd.DataFrame, slice_name: str = "all", metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """One row per (retriever, k), one column per metric (in first-seen order), from the aggregate table
    (retriever, k, slice, metric, value, ...)."""
    rows = aggregate[aggregate["slice"] == slice_name]
    names = list(metrics) if metrics is not None else list(pd.unique(rows["metric"]))
    rows = rows[rows["metric"].isin(names)]
    table = rows.pivot_table(index=["retriever", "k"], columns="metric", values="value", aggfunc="first", sort=True)
    return table.reindex(columns=[m for m in names if m in table.columns]).reset_index()


def metrics_table_markdown(
    aggregate: pd.DataFrame,
    slice_name: str = "all",
    metrics: Sequence[str] | None = None,
    digits: int = 3,
    *,
    max_rows: int | None = None,
    where: str = "",
) -> str:
    """The aggregate table of one slice as Markdown: retriever, k, then one column per metric (capped_table with
    `max_rows` and `where`)."""
    pivot = metric_pivot(aggregate, slice_name, metrics)
    if pivot.empty:
        return "_no metrics_"
    columns = list(pivot.columns)
    rows = [
        [_plain(v) if c in ("retriever", "k") else cell_text(_plain(v), digits) for c, v in zip(columns, record)]
        for record in pivot.itertuples(index=False)
    ]
    return capped_table(columns, rows, max_rows, where)


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


def _escape(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")
