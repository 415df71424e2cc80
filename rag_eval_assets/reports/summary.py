"""summary.md and the run-level tables the reports share: metric sections, call health, unresolved gold, what was
not computed."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from rag_eval_assets.corpus.gold import unresolved_summary
from rag_eval_assets.reports.comparison import comparison_markdown, verdict_line
from rag_eval_assets.reports.charts import CHARTS_DIR, report_k
from rag_eval_assets.reports.judges import judges_markdown
from rag_eval_assets.reports.markdown import markdown_table, metrics_table_markdown
from rag_eval_assets.reports.ranking import ranking_markdown
from rag_eval_assets.reports.sweep import charted_ranking, sweep_charts, sweep_markdown
from rag_eval_assets.runs.contents import JUDGES, UNRESOLVED_GOLD
from rag_eval_assets.runs.store import CHUNK_SIZE_KEY, EVAL_SET_VERSION_KEY, OVERLAP_KEY, Run, config_value, flatten
from rag_eval_assets.verdict.compare import Comparison
from rag_eval_assets.verdict.gate import is_answer_metric
from rag_eval_assets.verdict.ranking import KRanking


def summary_markdown(run: Run, description: str | None, previous: Run | None, rankings: Sequence[KRanking],
                     comparison: Comparison | None = None) -> str:
    """summary.md: the verdict against `previous` (its `comparison`), description, the ranking of retrievers
    (verdict/ranking.py rank_retrievers), the retrieval and answer metric tables, how far the judges can be
    trusted, what was not computed, the configuration, then the comparison in full."""
    parts = [f"# Run {run.run_id}", f"Created {run.created_at}."]
    if comparison is not None:
        parts.append(f"**{verdict_line(comparison)}**")
    parts += ["## Description", description or generated_description(run, previous)]
    aggregate = run.aggregate_frame()
    parts += ["## Which retriever is best", ranking_markdown(rankings, aggregate)]
    charted = charted_ranking(rankings, report_k(aggregate["k"])) if len(aggregate) else None
    charts = sweep_charts(run.config, charted) if charted is not None else []
    if charts:
        parts += [f"## The sweep (k={charted.k})", SWEEP_NOTE, sweep_markdown(charts, CHARTS_DIR)]
    parts += metric_sections(aggregate, "##")
    parts.append(
        "Means over the questions where a metric is defined (a metric with no inputs for a question is not "
        "applicable to it); 95% bootstrap intervals and per-slice values are in metrics.json, per-question values "
        "in results.jsonl."
    )
    judges = run.metrics.get(JUDGES)
    if judges:
        parts.append(judges_markdown(judges, "##"))
    unresolved = run.metrics.get(UNRESOLVED_GOLD)
    if unresolved:
        parts += ["## Unresolved gold", unresolved_summary(unresolved),
                  markdown_table(UNRESOLVED_HEADERS, unresolved_rows(unresolved))]
    health = run.metrics.get("call_health") or []
    if health:
        parts += ["## Calls behind the answer metrics", markdown_table(
            CALL_HEALTH_HEADERS, call_health_rows(health))]
    not_computed = run.metrics.get("not_computed") or []
    if not_computed:
        parts += ["## Not computed or not applicable",
                  "\n".join(f"- {not_computed_label(r)}: {r['reason']}" for r in not_computed)]
    parts += [
        "## Configuration",
        f"- config_hash: `{run.config.get('config_hash')}`\n"
        f"- chunk_size_chars: {config_value(run.config, CHUNK_SIZE_KEY)}, "
        f"overlap_chars: {config_value(run.config, OVERLAP_KEY)}",
        markdown_table(["key", "value"], [[k, _config_text(v)] for k, v in sorted(flatten(run.config).items())]),
    ]
    if comparison is not None:
        parts += [f"## Change against run {previous.run_id}", comparison_markdown(comparison)]
    return "\n\n".join(parts) + "\n"


SWEEP_NOTE = ("The gate metric of each variant against each parameter that varies among the variants of one kind, "
              "one column per value of another; where more parameters vary, each cell is the best variant with "
              "those values. In bold: the variants that may be the best.")


def metric_sections(aggregate: pd.DataFrame, level: str, *, max_rows: int | None = None, where: str = "") -> list[str]:
    """The slice-all metric table split in two, retrieval metrics and answer metrics, as Markdown sections (each
    capped at `max_rows` rows, the rest named as in `where`)."""
    names = list(pd.unique(aggregate.loc[aggregate["slice"] == "all", "metric"]))
    sections = []
    for title, wanted in (("Retrieval metrics", False), ("Answer metrics", True)):
        metrics = [m for m in names if is_answer_metric(m) == wanted]
        if metrics:
            sections += [f"{level} {title} (all questions)",
                         metrics_table_markdown(aggregate, metrics=metrics, max_rows=max_rows, where=where)]
    return sections


CALL_HEALTH_HEADERS = ["retriever", "k", "stage", "metric", "calls", "judged", "errors", "abstained", "first error"]
UNRESOLVED_HEADERS = ["question", "support", "why", "where"]


def unresolved_rows(unresolved: Mapping[str, Any]) -> list[list[str]]:
    return [[label["query_id"], label["support"], label["why"],
             label["file"] + ("" if label["line"] is None else f":{label['line']}")]
            for label in unresolved["labels"]]


def call_health_rows(health: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [[str(h["retriever"]), str(h["k"]), h.get("stage", ""), h["metric"], str(h["calls"]),
             str(h.get("judged", h["calls"] - h["errors"])), f"{h['errors']} ({h['error_rate']:.0%})",
             str(h.get("abstained", 0)), h.get("first_error") or ""]
            for h in health]


def not_computed_label(record: Mapping[str, Any]) -> str:
    """`metric`, with the cell when the reason is one cell's: `groundedness (bm25@5)`."""
    cell = f" ({record['retriever']}@{record['k']})" if record.get("retriever") is not None else ""
    return f"{record['metric']}{cell}"


def generated_description(run: Run, previous: Run | None) -> str:
    retrievers = sorted({str(r["retriever"]) for r in run.results})
    ks = sorted({int(r["k"]) for r in run.results})
    questions = len({r["query_id"] for r in run.results})
    version = config_value(run.config, EVAL_SET_VERSION_KEY)
    text = (
        f"{questions} questions{f' of {version}' if version else ''}, "
        f"retrievers {', '.join(retrievers) or '—'}, k = {', '.join(map(str, ks)) or '—'}"
    )
    if any(r.get("answer") for r in run.results):
        text += ", with answers"
    if previous is not None:
        text += f"; compared with run {previous.run_id}"
    return text + "."


def _config_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

