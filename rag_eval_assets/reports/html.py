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

from rag_eval_assets.corpus.gold import unresolved_summary
from rag_eval_assets.reports.charts import (
    CHARTS_DIR,
    DPI,
    FIGSIZE,
    plot_by_slice,
    plot_context_boxplots,
    plot_hit_bars,
    plot_hit_vs_k,
    plot_stage_costs,
    plot_sweep,
    plot_trend,
    report_k,
)
from rag_eval_assets.reports.judges import (
    AGREEMENT_HEADERS,
    ESTIMATE_HEADERS,
    SELF_HEADERS,
    TITLE,
    agreement_rows,
    confusion_tables,
    estimate_rows,
    judge_notes,
    self_consistency_rows,
)
from rag_eval_assets.reports.markdown import cell_text, metric_pivot
from rag_eval_assets.reports.ranking import BEST, IN_SET, variant_headers, variant_rows
from rag_eval_assets.reports.summary import (
    CALL_HEALTH_HEADERS,
    UNRESOLVED_HEADERS,
    call_health_rows,
    generated_description,
    not_computed_label,
    unresolved_rows,
)
from rag_eval_assets.reports.sweep import SweepChart, charted_ranking, sweep_charts
from rag_eval_assets.reports.verdict_html import VERDICT_CSS, verdict_section
from rag_eval_assets.runs.contents import JUDGES, UNRESOLVED_GOLD
from rag_eval_assets.runs.history import run_history
from rag_eval_assets.runs.store import CHUNK_SIZE_KEY, EVAL_SET_VERSION_KEY, OVERLAP_KEY, Run, config_value
from rag_eval_assets.verdict.gate import is_answer_metric
from rag_eval_assets.verdict.ranking import KRanking, rank_retrievers
from rag_eval_assets.verdict.settings import GateSettings

REPORT_FILE = "report.html"
# Chart name -> caption, in report order; by_<family> charts exist only for the slices the evalset has.
CHARTS = {
    "trend": "the gate metric over the last runs of this evalset",
    "hit_bars": "hit@k and doc_hit@k per retriever",
    "hit_vs_k": "hit@k against k",
    "context_boxplots": "context_precision and context_recall per retriever",
    "by_type": "metrics by question type",
    "by_category": "metrics by category",
    "by_difficulty": "metrics by difficulty",
    "by_tag": "metrics by tag",
    "stage_costs": "latency and cost per stage",
}
SLICE_FAMILIES = {"type": "question type", "category": "category", "difficulty": "difficulty", "tag": "tag"}
TREND_RUNS = 10
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
tr.best td { background: #d7f0dd; font-weight: 600; } tr.may-be-best td { background: #eef8f0; }
#ranking td { white-space: nowrap; }
"""
ROW_CLASS = {BEST: "best", IN_SET: "may-be-best"}


def slice_families(aggregate: pd.DataFrame) -> list[str]:
    """The slice families (type, category, difficulty, tag) the run's questions have."""
    present = {str(s).split("=", 1)[0] for s in aggregate["slice"] if "=" in str(s)}
    return [f for f in SLICE_FAMILIES if f in present]


def render_charts(run: Run, charts_dir: str | Path, *, k: int | None = None,
                  rankings: Sequence[KRanking] = ()) -> dict[str, Path]:
    """Draw the charts of CHARTS that apply to `run` into `charts_dir`; returns name -> PNG path."""
    charts_dir = Path(charts_dir)
    aggregate = run.aggregate_frame()
    k = k if k is not None else report_k(aggregate["k"])
    reasons = {r["metric"]: r["reason"] for r in run.metrics.get("not_computed") or []}
    charts = {}
    charted = charted_ranking(rankings, k)
    if charted is not None:
        metric = f"{charted.metric.removesuffix('@k')}@{charted.k}"
        charts["trend"] = plot_trend(_trend_frame(run, metric), charts_dir / "trend.png", metric=metric)
        for sweep in sweep_charts(run.config, charted):
            charts[sweep.name] = plot_sweep(sweep.points(), charts_dir / f"{sweep.name}.png", metric=sweep.metric,
                                            parameter=sweep.parameter, line=sweep.line, x_values=sweep.x_values(),
                                            title=sweep.title)
    charts |= {
        "hit_bars": plot_hit_bars(aggregate, charts_dir / "hit_bars.png", k=k),
        "hit_vs_k": plot_hit_vs_k(aggregate, charts_dir / "hit_vs_k.png"),
        "context_boxplots": plot_context_boxplots(
            run.per_query_frame(), charts_dir / "context_boxplots.png", reasons=reasons
        ),
    }
    for family in slice_families(aggregate):
        charts[f"by_{family}"] = plot_by_slice(aggregate, charts_dir / f"by_{family}.png", k=k, family=family)
    charts["stage_costs"] = plot_stage_costs(run.stage_frame(), charts_dir / "stage_costs.png")
    return charts


def _trend_frame(run: Run, metric: str) -> pd.DataFrame:
    """(run_id, retriever, value) over the last runs of the run's evalset up to this one, oldest first."""
    version = config_value(run.config, EVAL_SET_VERSION_KEY)
    entries = run_history(run.path.parent, metric, eval_set_version=version)
    ids = [e.run_id for e in entries]
    # The report may be built before or after newer runs exist: the trend ends at this run.
    entries = entries[ids.index(run.run_id):] if run.run_id in ids else entries
    entries = list(reversed(entries[:TREND_RUNS]))
    return pd.DataFrame([(e.run_id, r, v) for e in entries for r, v in e.values.items()],
                        columns=["run_id", "retriever", "value"])


def build_report(run: Run, out_dir: str | Path | None = None, *, k: int | None = None,
                 gate: GateSettings = GateSettings(), rankings: Sequence[KRanking] | None = None) -> Path:
    """Charts into <out_dir>/charts/ and the page into <out_dir>/report.html (out_dir defaults to the run's
    directory); returns the page's path. `gate` chooses the metric retrievers are ranked on; `rankings`, when the
    caller has ranked them already (reports/run_directory.py write_run), is that ranking."""
    out = Path(out_dir) if out_dir is not None else run.path
    aggregate = run.aggregate_frame()
    k = k if k is not None else report_k(aggregate["k"])
    rankings = rankings if rankings is not None else rank_retrievers(run, gate)
    page = render_html_report(run, render_charts(run, out / CHARTS_DIR, k=k, rankings=rankings), k=k,
                              rankings=rankings)
    target = out / REPORT_FILE
    tmp = target.with_name(f".{REPORT_FILE}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return target


def render_html_report(run: Run, charts: Mapping[str, str | Path], *, k: int,
                       rankings: Sequence[KRanking] = ()) -> str:
    """The report page of `run`: the verdict against its baseline, the ranking of retrievers, then the details,
    with the given charts (name -> PNG) embedded; `k` is the k of the single-k charts and of the slice tables."""
    aggregate = run.aggregate_frame()
    description = (run.metrics.get("run") or {}).get("description") or generated_description(run, None)
    sections = [
        f"<h1>Run {_e(run.run_id)}</h1>",
        f"<p>Created {_e(run.created_at)}. {_e(description)}</p>",
        verdict_section(run.comparison),
        _ranking_section(rankings, aggregate),
        _sweep_section(run, charted_ranking(rankings, k), charts),
        _definitions(
            [
                ("chunk_size_chars", config_value(run.config, CHUNK_SIZE_KEY)),
                ("overlap_chars", config_value(run.config, OVERLAP_KEY)),
                ("config_hash", run.config.get("config_hash")),
                ("eval_set_version", config_value(run.config, EVAL_SET_VERSION_KEY)),
            ]
        ),
        "<h2>Summary (all questions)</h2>",
        "<p>Means over the questions where a metric is defined (a metric with no inputs for a question is not "
        "applicable to it); hover a value for its 95% bootstrap interval.</p>",
    ]
    names = list(pd.unique(aggregate.loc[aggregate["slice"] == "all", "metric"]))
    for title, wanted in (("Retrieval metrics", False), ("Answer metrics", True)):
        metrics = [m for m in names if is_answer_metric(m) == wanted]
        if metrics:
            sections += [f'<h3 id="summary-{"answers" if wanted else "retrieval"}">{title}</h3>',
                         _metric_table(aggregate, "all", metrics=metrics)]
    judges = run.metrics.get(JUDGES)
    if judges:
        sections.append(_judges_section(judges))
    unresolved = run.metrics.get(UNRESOLVED_GOLD)
    if unresolved:
        sections += ['<h2 id="unresolved-gold">Unresolved gold</h2>', f"<p>{_e(unresolved_summary(unresolved))}</p>",
                     _table(UNRESOLVED_HEADERS, unresolved_rows(unresolved))]
    sections.append("<h2>Charts</h2>")
    sections += [_figure(name, caption, charts[name]) for name, caption in CHARTS.items() if name in charts]
    for family in slice_families(aggregate):
        sections += [f"<h2>By {_e(SLICE_FAMILIES[family])} (k = {k})</h2>", _slice_tables(aggregate, family, k)]
    health = run.metrics.get("call_health") or []
    if health:
        sections += ['<h2 id="calls">Calls behind the answer metrics</h2>',
                     _table(CALL_HEALTH_HEADERS, call_health_rows(health))]
    not_computed = run.metrics.get("not_computed") or []
    if not_computed:
        items = "".join(f"<li><b>{_e(not_computed_label(r))}</b>: {_e(r['reason'])}</li>" for r in not_computed)
        sections += ["<h2>Not computed or not applicable</h2>", f"<ul>{items}</ul>"]
    sections += ["<h2>Version tuple</h2>", _version_table(run.config.get("version_tuple") or {})]
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>Run {_e(run.run_id)}</title><style>{CSS}{VERDICT_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _ranking_section(rankings: Sequence[KRanking], aggregate: pd.DataFrame) -> str:
    if not rankings:
        return ('<section id="ranking"><h2>Which retriever is best</h2><p>not computed: no metric has a value for '
                "every retriever</p></section>")
    items = "".join(f"<li>{_e(r.sentence())}</li>" for r in rankings)
    tables = []
    for r in rankings:
        head = "".join(f"<th>{_e(h)}</th>" for h in variant_headers(r, aggregate))
        body = "".join(
            f'<tr data-retriever="{_e(row.retriever)}"'
            + (f' class="{ROW_CLASS[row.mark]}"' if row.mark in ROW_CLASS else "") + ">"
            + "".join(f"<td>{_e(c)}</td>" if i in (1, 2) else f'<td class="num">{_e(c)}</td>'
                      for i, c in enumerate(row.cells))
            + "</tr>"
            for row in variant_rows(r, aggregate))
        tables.append(f'<h3 id="ranking-k{r.k}">k = {r.k}</h3><div class="scroll"><table data-k="{r.k}"><thead>'
                      f"<tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")
    return (
        '<section id="ranking"><h2>Which retriever is best</h2><p>Per k, the retrievers ranked on the gate metric '
        "over the questions every one of them scored. The confidence set of the best (shaded; the best in bold) holds "
        f"the retrievers no other is significantly better than, at alpha {rankings[0].alpha:g}: the true best is in it "
        "at least 1 - alpha of the time. p (best): the smallest alpha at which a retriever would leave the set. The "
        "other metrics are means over the questions where each is defined.</p>"
        f"<ul>{items}</ul>{''.join(tables)}</section>"
    )


def _sweep_section(run: Run, charted: KRanking | None, charts: Mapping[str, str | Path]) -> str:
    drawn: list[SweepChart] = [c for c in sweep_charts(run.config, charted) if c.name in charts] if charted else []
    if not drawn:
        return ""
    figures = "".join(_figure(c.name, c.title.replace("\n", "; "), charts[c.name]) for c in drawn)
    return (f'<section id="sweep"><h2>The sweep (k = {charted.k})</h2><p>The gate metric of each variant against '
            "each parameter that varies among the variants of one kind, one line per value of another; filled "
            f"points may be the best.</p>{figures}</section>")


def _figure(name: str, caption: str, png: str | Path) -> str:
    width, height = int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI)
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    return (f'<figure id="chart-{name}"><img data-chart="{name}" alt="{_e(caption)}" width="{width}" '
            f'height="{height}" src="data:image/png;base64,{data}"><figcaption>{_e(caption)}</figcaption></figure>')


def _judges_section(judges: Mapping[str, Any]) -> str:
    """Agreement with the person's grades and with itself beside the raw and calibrated judge means."""
    parts = [f'<section id="judges"><h2>{_e(TITLE)}</h2>',
             "<ul>" + "".join(f"<li>{_e(note)}</li>" for note in judge_notes(judges)) + "</ul>",
             "<h3>Agreement with the person's grades</h3>", _table(AGREEMENT_HEADERS, agreement_rows(judges))]
    spot = self_consistency_rows(judges)
    if spot:
        parts += ["<h3>Agreement with itself (spot-check)</h3>", _table(SELF_HEADERS, spot)]
    parts += ["<h3>Judge means, raw and calibrated by the grades</h3>", _table(ESTIMATE_HEADERS, estimate_rows(judges))]
    for judge, headers, rows in confusion_tables(judges):
        parts += [f"<h3>Confusion of {_e(judge)}</h3>", _table(headers, rows)]
    return "".join(parts) + "</section>"


def _e(value: Any) -> str:
    return html.escape("—" if value is None else str(value))


def _definitions(items: Sequence[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>" for key, value in items) + "</dl>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


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


def _metric_table(aggregate: pd.DataFrame, slice_name: str, k: int | None = None,
                  metrics: Sequence[str] | None = None) -> str:
    rows = aggregate[aggregate["slice"] == slice_name]
    if k is not None:
        rows = rows[rows["k"] == k]
    pivot = metric_pivot(rows, slice_name, metrics)
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


def _slice_tables(aggregate: pd.DataFrame, family: str, k: int) -> str:
    slices = [s for s in pd.unique(aggregate["slice"]) if str(s).startswith(f"{family}=")]
    return "\n".join(f"<h3>{_e(s)}</h3>" + _metric_table(aggregate, s, k) for s in slices)
