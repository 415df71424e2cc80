"""The runs of a store over time: evalset version, a headline metric per retriever and each run's verdict against
its baseline, newest first (`rag-eval history`, the report's trend chart)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.store import COMPARISON_JSON, CONFIG_FILE, EVAL_SET_VERSION_KEY, METRICS_FILE, config_value

_METRIC_AT = re.compile(r"^(?P<name>.+?)@(?P<k>\d+)$")


@dataclass(frozen=True)
class HistoryEntry:
    run_id: str
    created_at: str | None
    eval_set_version: str | None
    k: int | None  # the k the values are at
    values: dict[str, float | None]  # retriever -> the metric's mean (slice all)
    verdict: str | None  # against the run's baseline; None when it had none
    base_run_id: str | None


def parse_metric(spec: str) -> tuple[str, int | None]:
    """"ndcg@10" -> ("ndcg", 10), read as ndcg@k at k = 10; "weighted_score@5" -> ("weighted_score", 5);
    "weighted_score" -> ("weighted_score", None)."""
    match = _METRIC_AT.match(spec)
    return (match["name"], int(match["k"])) if match else (spec, None)


def run_history(
    runs_dir: str | Path,
    metric: str = "ndcg@10",
    *,
    retriever: str | None = None,
    eval_set_version: str | None = None,
    last: int | None = None,
) -> list[HistoryEntry]:
    """Entries for the runs under `runs_dir`, newest first; only those of `eval_set_version` when given, at most
    `last`. `metric` is written as on the command line: `ndcg@10` is ndcg@k at k = 10; a metric without @N is read
    at the largest k that has it."""
    name, k = parse_metric(metric)
    entries = []
    for path in list_runs(runs_dir):
        metrics, config = _read_json(path / METRICS_FILE), _read_json(path / CONFIG_FILE)
        if metrics is None or config is None:
            continue
        version = config_value(config, EVAL_SET_VERSION_KEY)
        if eval_set_version is not None and version != eval_set_version:
            continue
        at_k, values = _values(metrics.get("aggregate") or [], name, k, retriever)
        comparison = _read_json(path / COMPARISON_JSON) or {}
        entries.append(HistoryEntry(path.name, (metrics.get("run") or {}).get("created_at"), version, at_k, values,
                                    comparison.get("verdict"), comparison.get("base_run_id")))
        if last is not None and len(entries) >= last:
            break
    return entries


def _values(aggregate: list[dict[str, Any]], name: str, k: int | None, retriever: str | None):
    rows = [r for r in aggregate if r.get("slice") == "all" and r.get("metric") in (name, f"{name}@k")
            and (retriever is None or r.get("retriever") == retriever)]
    if k is None and rows:
        k = max(int(r["k"]) for r in rows)
    return k, {str(r["retriever"]): r.get("value") for r in rows if int(r["k"]) == k}


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def format_history(entries: list[HistoryEntry], metric: str) -> str:
    """A terminal table: run id, created, evalset version, one column per retriever, verdict (against base)."""
    if not entries:
        return "no runs in the store\n"
    retrievers = sorted({r for e in entries for r in e.values})
    headers = ["run_id", "created_at", "eval_set_version", *(f"{r} {metric}" for r in retrievers), "verdict"]
    rows = [
        [e.run_id, e.created_at or "—", e.eval_set_version or "—",
         *("—" if e.values.get(r) is None else f"{e.values[r]:.4f}" for r in retrievers),
         f"{e.verdict} (vs {e.base_run_id})" if e.verdict else "no baseline"]
        for e in entries
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in [headers, *rows]]
    return "\n".join(lines) + "\n"
