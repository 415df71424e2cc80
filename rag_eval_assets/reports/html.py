"""The run report: one self-contained HTML file (inline CSS, charts as base64 PNG data URIs, no external URL), so
it opens from disk, from a CI artifact or from an e-mail attachment alike."""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval_assets.reports.charts import (
    DPI,
    FIGSIZE,
    plot_by_question_type,
    plot_context_boxplots,
    plot_hit_bars,
    plot_hit_vs_k,
    plot_stage_costs,
)
from rag_eval_assets.reports.markdown import cell_text, metric_pivot
from rag_eval_assets.runs.store import CHUNK_SIZE_KEY, OVERLAP_KEY, Run, config_value, generated_description

REPORT_FILE = "report.html"
CHARTS_DIR = "charts"
# Chart name -> caption, in report order.
CHARTS = {
    "hit_bars": "hit@k and doc_hit@k per retriever",
    "hit_vs_k": "hit@k against k",
    "context_boxplots": "context_precision and context_recall per retriever",
    "by_question_type": "metrics by question type",
    "stage_costs": "latency and cost per stage",
}
CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f2f2f2; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; font-family: monospace; }
figure { margin: 1.5rem 0; } figcaption { color: #555; font-size: .9rem; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
"""


def report_k(ks: Sequence[int]) -> int:
    """The k the single-k charts use by default: the lower median of the run's k values (5 of 1, 3, 5, 10, 20)."""
    values = sorted(set(int(k) for k in ks))
    if not values:
        raise ValueError("the run has no k")
    return values[(len(values) - 1) // 2]


def render_charts(run: Run, charts_dir: str | Path, *, k: int | None = None) -> dict[str, Path]:
    """Draw every chart of CHARTS for `run` into `charts_dir`; returns name -> PNG path."""
    charts_dir = Path(charts_dir)
    aggregate = run.aggregate_frame()
    k = k if k is not None else report_k(aggregate["k"])
    reasons = {r["metric"]: r["reason"] for r in run.metrics.get("not_computed") or []}
    return {
        "hit_bars": plot_hit_bars(aggregate, charts_dir / "hit_bars.png", k=k),
        "hit_vs_k": plot_hit_vs_k(aggregate, charts_dir / "hit_vs_k.png"),
        "context_boxplots": plot_context_boxplots(
            run.per_query_frame(), charts_dir / "context_boxplots.png", reasons=reasons
        ),
        "by_question_type": plot_by_question_type(aggregate, charts_dir / "by_question_type.png", k=k),
        "stage_costs": plot_stage_costs(run.stage_frame(), charts_dir / "stage_costs.png"),
    }


def build_report(run: Run, out_dir: str | Path | None = None, *, k: int | None = None) -> Path:
    """Charts into <out_dir>/charts/ and the page into <out_dir>/report.html (out_dir defaults to the run's
    directory); returns the page's path."""
    out = Path(out_dir) if out_dir is not None else run.path
    aggregate = run.aggregate_frame()
    k = k if k is not None else report_k(aggregate["k"])
    page = render_html_report(run, render_charts(run, out / CHARTS_DIR, k=k), k=k)
    target = out / REPORT_FILE
    tmp = target.with_name(f".{REPORT_FILE}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return target


def render_html_report(run: Run, charts: Mapping[str, str | Path], *, k: int) -> str:
    """The report page of `run` with the given charts (name -> PNG) embedded; `k` is the k of the single-k charts
    and of the by-type table."""
    aggregate = run.aggregate_frame()
    description = (run.metrics.get("run") or {}).get("description") or generated_description(run, None)
    # Headline numbers and charts first; the detail (per type, version tuple) below them.
    sections = [
        f"<h1>Run {_e(run.run_id)}</h1>",
        f"<p>Created {_e(run.created_at)}. {_e(description)}</p>",
        _definitions(
            [
                ("chunk_size_chars", config_value(run.config, CHUNK_SIZE_KEY)),
                ("overlap_chars", config_value(run.config, OVERLAP_KEY)),
                ("config_hash", run.config.get("config_hash")),
                ("eval_set_version", config_value(run.config, "version_tuple.dataset.eval_set_version")),
            ]
        ),
        "<h2>Summary (all questions)</h2>",
        "<p>Means over the questions where a metric is defined; hover a value for its 95% bootstrap interval.</p>",
        _metric_table(aggregate, "all"),
        "<h2>Charts</h2>",
    ]
    width, height = int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI)
    for name, caption in CHARTS.items():
        if name not in charts:
            continue
        data = base64.b64encode(Path(charts[name]).read_bytes()).decode("ascii")
        sections.append(
            f'<figure id="chart-{name}"><img data-chart="{name}" alt="{_e(caption)}" width="{width}" '
            f'height="{height}" src="data:image/png;base64,{data}"><figcaption>{_e(caption)}</figcaption></figure>'
        )
    sections += [f"<h2>By question type (k = {k})</h2>", _type_table(aggregate, k)]
    not_computed = run.metrics.get("not_computed") or []
    if not_computed:
        items = "".join(f"<li><b>{_e(r['metric'])}</b>: {_e(r['reason'])}</li>" for r in not_computed)
        sections += ["<h2>Not computed</h2>", f"<ul>{items}</ul>"]
    sections += ["<h2>Version tuple</h2>", _version_table(run.config.get("version_tuple") or {})]
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>Run {_e(run.run_id)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _e(value: Any) -> str:
    return html.escape("—" if value is None else str(value))


def _definitions(items: Sequence[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>" for key, value in items) + "</dl>"


def _version_table(versions: Mapping[str, Any]) -> str:
    rows = [
        (part, key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for part, values in versions.items()
        for key, value in sorted((values or {}).items())
    ]
    if not rows:
        return "<p>not recorded</p>"
    body = "".join(f"<tr><td>{_e(p)}</td><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for p, k, v in rows)
    return f"<table><thead><tr><th>part</th><th>key</th><th>value</th></tr></thead><tbody>{body}</tbody></table>"


def _metric_table(aggregate: pd.DataFrame, slice_name: str, k: int | None = None) -> str:
    rows = aggregate[aggregate["slice"] == slice_name]
    if k is not None:
        rows = rows[rows["k"] == k]
    pivot = metric_pivot(rows, slice_name)
    if pivot.empty:
        return "<p>no metrics</p>"
    intervals = {
        (r.retriever, r.k, r.metric): f"95% CI {cell_text(r.ci_low)}–{cell_text(r.ci_high)}, n = {r.n}"
        for r in rows.itertuples(index=False)
    }
    metrics = [c for c in pivot.columns if c not in ("retriever", "k")]
    head = "".join(f"<th>{_e(c)}</th>" for c in ["retriever", "k", *metrics])
    body = []
    for record in pivot.to_dict("records"):
        cells = [f"<td>{_e(record['retriever'])}</td>", f"<td class=\"num\">{_e(record['k'])}</td>"]
        for metric in metrics:
            title = intervals.get((record["retriever"], record["k"], metric), "")
            cells.append(f'<td class="num" title="{_e(title)}">{_e(cell_text(record[metric]))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    # Many metrics make a wide table: it scrolls on its own instead of widening the page.
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _type_table(aggregate: pd.DataFrame, k: int) -> str:
    slices = [s for s in pd.unique(aggregate["slice"]) if str(s).startswith("type=")]
    if not slices:
        return "<p>not computed: the questions have no type</p>"
    return "\n".join(f"<h3>{_e(s)}</h3>" + _metric_table(aggregate, s, k) for s in slices)
