"""The runs under a runs directory (runs/store.py has the layout): newest first, the latest of an evalset, the one a
Dagster run group wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_eval_assets.runs.store import CONFIG_FILE, EVAL_SET_VERSION_KEY, METRICS_FILE, PIPELINE_RUN_KEY, config_value


def list_runs(runs_dir: str | Path) -> list[Path]:
    """The complete runs under `runs_dir`, newest first (by metrics.json's created_at, then id), ignoring hidden
    entries and directories without a readable metrics.json."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    candidates = []
    for path in runs_dir.iterdir():
        if path.name.startswith(".") or not (path / METRICS_FILE).is_file():
            continue
        try:
            created = (json.loads((path / METRICS_FILE).read_text(encoding="utf-8")).get("run") or {}).get("created_at")
        except json.JSONDecodeError:
            continue
        candidates.append((created or "", _id_order(path.name), path))
    return [path for *_, path in sorted(candidates, reverse=True)]


def latest_run(runs_dir: str | Path, eval_set_version: str | None = None) -> Path | None:
    """The most recently created complete run under `runs_dir` (of `eval_set_version` when given), or None."""
    for path in list_runs(runs_dir):
        if eval_set_version is None or run_eval_set_version(path) == eval_set_version:
            return path
    return None


def run_eval_set_version(path: Path) -> str | None:
    return config_value(_config(path), EVAL_SET_VERSION_KEY)


def run_of_pipeline(runs_dir: str | Path, root_run_id: str) -> Path | None:
    """The run directory written by Dagster run `root_run_id` or by a re-execution of it, if any."""
    for path in list_runs(runs_dir):
        if _config(path).get(PIPELINE_RUN_KEY) == root_run_id:
            return path
    return None


def _config(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _id_order(name: str) -> tuple[str, int]:
    """`20251218_063617-10` after `20251218_063617-2`."""
    stem, _, suffix = name.rpartition("-")
    return (stem, int(suffix)) if stem and suffix.isdigit() else (name, 1)
