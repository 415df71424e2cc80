"""The run store (seed 002 "Results Storage"): one directory per evaluation run.

    <runs_dir>/<run_id>/
        results.jsonl   one line per (question, retriever, k): question, retrieved chunks, answer, judgments, metrics
        metrics.json    the aggregates (+ the run's id, creation time, description, previous run)
        config.json     the full configuration: version tuple, config_hash, ... (secret-looking keys dropped, URLs
                        redacted: redaction.py)
        summary.md      description, configuration, metric table, change against the previous run
        status.json     whether the run is good: its blocking checks passed and its pipeline finished (status.py)

Run ids are UTC timestamps (`20251218_063617`, then `-2`, `-3` for runs started in the same second). A run is written
into a hidden temporary directory and renamed into place, so a run directory is either complete or absent.

This module holds the layout and reads a run back (Run, read_run); what the files hold is made by contents.py,
written by save.py and the runs under a directory are found by listing.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS
from rag_eval_assets.runs.contents import judgment_frame

RESULTS_FILE = "results.jsonl"
METRICS_FILE = "metrics.json"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.md"
COMPARISON_JSON = "comparison.json"  # the comparison with the run's baseline, when it had one
COMPARISON_MD = "comparison.md"
RUN_STATUS_FILE = "status.json"  # runs/status.py
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # created_at, accepted_at, sent_at: UTC
EVAL_SET_VERSION_KEY = "version_tuple.dataset.eval_set_version"
CHUNK_SIZE_KEY = "version_tuple.index.chunk_size_chars"
OVERLAP_KEY = "version_tuple.index.overlap_chars"
# The Dagster run a run directory belongs to: the first run of its group, so that a re-execution finds it again.
PIPELINE_RUN_KEY = "dagster_root_run_id"
STAGES = ("retrieval", "generation", "judging")


@dataclass(frozen=True)
class Run:
    """A run as read back from its directory."""

    path: Path
    results: list[dict[str, Any]]
    metrics: dict[str, Any]
    config: dict[str, Any]
    summary: str
    comparison: dict[str, Any] | None = None  # comparison.json: the verdict against the run's baseline

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def created_at(self) -> str | None:
        return (self.metrics.get("run") or {}).get("created_at")

    def aggregate_frame(self) -> pd.DataFrame:
        """metrics.json's aggregate rows: retriever, k, slice, metric, value, ci_low, ci_high, n."""
        rows = pd.DataFrame(self.metrics.get("aggregate") or [], columns=list(AGGREGATE_COLUMNS))
        for column in ("value", "ci_low", "ci_high"):
            rows[column] = pd.to_numeric(rows[column], errors="coerce").astype(float)
        return rows

    def per_query_frame(self) -> pd.DataFrame:
        """Every per-question metric of results.jsonl: query_id, retriever, k, metric, value (NaN when null)."""
        records = [
            (row["query_id"], row["retriever"], row["k"], metric, np.nan if value is None else float(value))
            for row in self.results
            for metric, value in (row.get("metrics") or {}).items()
        ]
        return pd.DataFrame(records, columns=["query_id", "retriever", "k", "metric", "value"])

    def judgment_frame(self) -> pd.DataFrame:
        """Every judgement of results.jsonl: query_id, retriever, k, judge, score (NaN when none), replicate and
        judge_input_sha256 (None in runs written before it was recorded, or where the judge was not called)."""
        return judgment_frame(self.results)

    def stage_frame(self) -> pd.DataFrame:
        """Latency and cost per stage: stage, retriever, k, query_id, latency_s, cost_usd (NaN when not recorded).
        Retrieval happens once per (question, retriever) whatever k, so its rows carry k = NaN."""
        records, seen = [], set()
        for row in self.results:
            latency, cost = row.get("latency_s") or {}, row.get("cost_usd") or {}
            for stage in STAGES:
                if latency.get(stage) is None and cost.get(stage) is None:
                    continue
                k = row["k"]
                if stage == "retrieval":
                    if (row["query_id"], row["retriever"]) in seen:
                        continue
                    seen.add((row["query_id"], row["retriever"]))
                    k = None
                records.append((stage, row["retriever"], k, row["query_id"], latency.get(stage), cost.get(stage)))
        frame = pd.DataFrame(records, columns=["stage", "retriever", "k", "query_id", "latency_s", "cost_usd"])
        for column in ("k", "latency_s", "cost_usd"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
        return frame


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (`version_tuple.judge.model`); lists stay values."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            flat.update(flatten(item, name + "."))
        else:
            flat[name] = item
    return flat


def read_run(path: str | Path) -> Run:
    """The run in directory `path`; InputError naming every missing or unreadable file (and line)."""
    path = Path(path)
    problems: list[InputProblem] = []
    documents: dict[str, Any] = {}
    for name in (METRICS_FILE, CONFIG_FILE):
        file = path / name
        try:
            documents[name] = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(InputProblem(str(file), None, None, "missing: not a run directory"))
        except json.JSONDecodeError as exc:
            problems.append(InputProblem(str(file), exc.lineno, None, f"invalid JSON: {exc.msg}"))
    rows: list[dict[str, Any]] = []
    results_file = path / RESULTS_FILE
    if results_file.is_file():
        with results_file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    problems.append(InputProblem(str(results_file), number, None, f"invalid JSON: {exc.msg}"))
    else:
        problems.append(InputProblem(str(results_file), None, None, "missing: not a run directory"))
    if problems:
        raise InputError(problems)
    summary_file = path / SUMMARY_FILE
    summary = summary_file.read_text(encoding="utf-8") if summary_file.is_file() else ""
    comparison_file = path / COMPARISON_JSON
    comparison = json.loads(comparison_file.read_text(encoding="utf-8")) if comparison_file.is_file() else None
    return Run(path, rows, documents[METRICS_FILE], documents[CONFIG_FILE], summary, comparison)


def config_value(config: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted key of a nested config, None when any part is absent."""
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
