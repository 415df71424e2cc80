"""Charts of a run as PNG files of a fixed size (seed 001 "visualisation", seed 004 per-type reports).

Every chart is FIGSIZE x DPI = 900 x 500 pixels. Figures are drawn on matplotlib's Agg canvas without pyplot, so
nothing depends on a display or on global pyplot state. A chart whose data is absent is still drawn, saying
"not computed: <reason>", so a report always has the same sections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from rag_eval_assets.metrics.ragas_context import RAGAS_METRICS

CHARTS_DIR = "charts"  # in the run directory, beside summary.md and report.html, which show them
FIGSIZE = (9.0, 5.0)
DPI = 100
TYPE_METRICS = ("hit@k", "mrr@k")


def report_k(ks: Sequence[int]) -> int:
    """The k the single-k charts use by default: the lower median of the run's k values (5 of 1, 3, 5, 10, 20)."""
    values = sorted(set(int(k) for k in ks))
    if not values:
        raise ValueError("the run has no k")
    return values[(len(values) - 1) // 2]


def plot_hit_bars(aggregate: pd.DataFrame, path: str | Path, *, k: int) -> Path:
    """hit@k and doc_hit@k per retriever at one k (slice "all"), with their 95% intervals."""
    title = f"hit@k and doc_hit@k at k = {k}"
    rows = aggregate[(aggregate["slice"] == "all") & (aggregate["k"] == k)]
    metrics = [m for m in ("hit@k", "doc_hit@k") if m in set(rows["metric"])]
    if not metrics:
        return _placeholder(path, title, f"no hit@k or doc_hit@k at k = {k}")
    fig, ax = _figure()
    retrievers = sorted(rows["retriever"].unique())
    width = 0.8 / len(metrics)
    x = np.arange(len(retrievers))
    for i, metric in enumerate(metrics):
        values = rows[rows["metric"] == metric].set_index("retriever").reindex(retrievers)
        heights = values["value"].to_numpy(dtype=float)
        errors = np.vstack([heights - values["ci_low"], values["ci_high"] - heights]).astype(float)
        bars = ax.bar(x + (i - (len(metrics) - 1) / 2) * width, heights, width, label=metric,
                      yerr=np.nan_to_num(errors), capsize=3)
        ax.bar_label(bars, fmt="%.2f", padding=2)
    ax.set_xticks(x, retrievers)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("mean over questions")
    ax.set_title(title)
    ax.legend()
    return _save(fig, path)


def plot_hit_vs_k(aggregate: pd.DataFrame, path: str | Path, *, metric: str = "hit@k") -> Path:
    """`metric` against k, one line per retriever (slice "all")."""
    title = f"{metric} vs k"
    rows = aggregate[(aggregate["slice"] == "all") & (aggregate["metric"] == metric)]
    if rows.empty:
        return _placeholder(path, title, f"{metric} is not in this run")
    fig, ax = _figure()
    for retriever, group in rows.sort_values("k").groupby("retriever", sort=True):
        ax.plot(group["k"], group["value"], marker="o", label=retriever)
        ax.fill_between(group["k"].to_numpy(dtype=float), group["ci_low"].to_numpy(dtype=float),
                        group["ci_high"].to_numpy(dtype=float), alpha=0.15)
    ks = sorted(rows["k"].unique())
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("k")
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.legend()
    return _save(fig, path)


def plot_context_boxplots(
    per_query: pd.DataFrame,
    path: str | Path,
    *,
    k: int | None = None,
    reasons: Mapping[str, str] | None = None,
) -> Path:
    """Boxplots of the per-question context_precision and context_recall per retriever at one k (by default the
    lower median of the k values they were computed at). Metrics without values are named with their reason from
    `reasons` (metric -> reason)."""
    rows = per_query[per_query["metric"].isin(RAGAS_METRICS) & per_query["value"].notna()]
    if k is None and not rows.empty:
        ks = sorted(rows["k"].unique())
        k = int(ks[(len(ks) - 1) // 2])
    title = "context_precision / context_recall per retriever" + (f" at k = {k}" if k is not None else "")
    if k is not None:
        rows = rows[rows["k"] == k]
    present = [m for m in RAGAS_METRICS if m in set(rows["metric"])]
    missing = [m for m in RAGAS_METRICS if m not in present]
    why = "; ".join(f"{m}: {(reasons or {}).get(m, 'not in this run')}" for m in missing)
    if not present:
        return _placeholder(path, title, why)
    fig, axes = _figure(ncols=len(present))
    for ax, metric in zip(np.atleast_1d(axes), present):
        groups = rows[rows["metric"] == metric].groupby("retriever", sort=True)["value"]
        ax.boxplot([g.to_numpy() for _, g in groups], tick_labels=[name for name, _ in groups])
        ax.set_title(metric)
        ax.set_ylim(-0.05, 1.05)
    fig.suptitle(title + (f"\nnot computed: {why}" if missing else ""))
    return _save(fig, path)


def plot_by_slice(
    aggregate: pd.DataFrame, path: str | Path, *, k: int, family: str = "type", metrics: Sequence[str] = TYPE_METRICS
) -> Path:
    """`metrics` per slice of one family at one k, one bar per retriever: question type (seed 001 definition / fact
    / negative, seed 004 literal / paraphrase / scenario), seed 002 category, difficulty or tag."""
    title = f"by {family} at k = {k}"
    rows = aggregate[aggregate["slice"].str.startswith(f"{family}=") & (aggregate["k"] == k)]
    present = [m for m in metrics if m in set(rows["metric"])]
    if not present:
        return _placeholder(path, title, f"the questions have no {family}" if rows.empty else f"no {', '.join(metrics)}")
    fig, axes = _figure(ncols=len(present))
    for ax, metric in zip(np.atleast_1d(axes), present):
        table = rows[rows["metric"] == metric].pivot_table(index="slice", columns="retriever", values="value")
        labels = [s.removeprefix(f"{family}=") for s in table.index]
        width = 0.8 / len(table.columns)
        x = np.arange(len(labels))
        for i, retriever in enumerate(table.columns):
            ax.bar(x + (i - (len(table.columns) - 1) / 2) * width, table[retriever].to_numpy(dtype=float), width,
                   label=retriever)
        ax.set_xticks(x, labels, rotation=30 if len(labels) > 4 else 0)
        ax.set_ylim(0, 1.05)
        ax.set_title(metric)
    np.atleast_1d(axes)[0].legend()
    fig.suptitle(title)
    return _save(fig, path)


def plot_trend(history: pd.DataFrame, path: str | Path, *, metric: str) -> Path:
    """`metric` over the runs of one evalset, oldest to newest, one line per retriever, from rows (run_id,
    retriever, value) in run order."""
    title = f"{metric} over the last runs of this evalset"
    rows = history[history["value"].notna()]
    if rows.empty:
        return _placeholder(path, title, "no earlier run of this evalset")
    fig, ax = _figure()
    runs = list(pd.unique(history["run_id"]))
    for retriever, group in rows.groupby("retriever", sort=True):
        ax.plot([runs.index(r) for r in group["run_id"]], group["value"], marker="o", label=retriever)
    ax.set_xticks(range(len(runs)), runs, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.legend()
    return _save(fig, path)


def plot_sweep(points: pd.DataFrame, path: str | Path, *, metric: str, parameter: str, line: str | None,
               x_values: Sequence[str], title: str) -> Path:
    """`metric` against one swept parameter, one line per value of another (`line`), from rows (x, line, retriever,
    value, may_be_best) (reports/sweep.py profile) with the x labels in axis order: each point the best variant with
    those values, filled when it may be the best, hollow when it is out of the confidence set."""
    fig, ax = _figure()
    position = {label: i for i, label in enumerate(x_values)}
    for label, group in points.groupby("line", sort=False):
        xs = group["x"].map(position).to_numpy(dtype=float)
        (drawn,) = ax.plot(xs, group["value"].to_numpy(dtype=float), label=f"{line} = {label}" if line else metric)
        inside = group["may_be_best"].to_numpy(dtype=bool)
        ax.scatter(xs[inside], group["value"].to_numpy(dtype=float)[inside], color=drawn.get_color(), zorder=3)
        ax.scatter(xs[~inside], group["value"].to_numpy(dtype=float)[~inside], facecolors="white",
                   edgecolors=drawn.get_color(), zorder=3)
    ax.set_xticks(range(len(x_values)), x_values, rotation=30 if len(x_values) > 6 else 0)
    ax.set_xlabel(parameter)
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.legend(title="filled: may be the best", fontsize=8)
    return _save(fig, path)


def plot_stage_costs(stages: pd.DataFrame, path: str | Path) -> Path:
    """Latency (mean and p95 per call) and total cost per stage, from rows (stage, latency_s, cost_usd)."""
    title = "latency and cost per stage"
    timed = stages[stages["latency_s"].notna()]
    if timed.empty:
        return _placeholder(path, title, "no latency recorded")
    fig, (left, right) = _figure(ncols=2)
    names = list(pd.unique(stages["stage"]))  # the order of the run's rows: retrieval, generation, judging
    latency = timed.groupby("stage")["latency_s"]
    means = latency.mean().reindex(names).to_numpy(dtype=float)
    p95 = latency.quantile(0.95).reindex(names).to_numpy(dtype=float)
    x = np.arange(len(names))
    left.bar(x - 0.2, means, 0.4, label="mean")
    left.bar(x + 0.2, p95, 0.4, label="p95")
    if np.nanmax(p95) > 0:
        left.set_ylim(0, 1.2 * np.nanmax(p95))  # room for the legend above the bars
    left.set_xticks(x, names)
    left.set_ylabel("seconds per call")
    left.set_title("latency")
    left.legend(loc="upper right")
    costs = stages.groupby("stage")["cost_usd"].sum(min_count=1).reindex(names)
    if costs.notna().any():
        bars = right.bar(x, costs.fillna(0.0).to_numpy(dtype=float), 0.6, color="tab:green")
        right.bar_label(bars, labels=["—" if np.isnan(c) else f"${c:.4f}" for c in costs], padding=2)
        right.set_xticks(x, names)
        right.set_ylabel("USD, whole run")
    else:
        right.text(0.5, 0.5, "not computed: no cost recorded", ha="center", va="center", transform=right.transAxes)
        right.set_axis_off()
    right.set_title("cost")
    fig.suptitle(title)
    return _save(fig, path)


def _figure(ncols: int = 1):
    # matplotlib when a chart is drawn, not when the code location is imported: every Dagster process (each launched
    # run) imports it, and matplotlib is over a second of that.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, ncols)


def _placeholder(path: str | Path, title: str, reason: str) -> Path:
    fig, ax = _figure()
    ax.set_axis_off()
    ax.text(0.5, 0.5, f"{title}\n\nnot computed: {reason}", ha="center", va="center", wrap=True, fontsize=13)
    return _save(fig, path)


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # No bbox_inches="tight": it would change the pixel size from chart to chart.
    fig.savefig(path, dpi=DPI, format="png")
    return path
