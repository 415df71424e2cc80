"""Whether a run directory holds a good run: its status.json, written with the directory and updated once the
run's blocking checks and its pipeline are done. Only a good run becomes a baseline by itself (runs/baseline.py).

    {"state": "pending" | "failed" | "good", "pipeline": "<PIPELINE_TAG value or null>", "reasons": [...]}

- pending: written, but its pipeline has not finished: still running, or a later step failed or was stopped;
- failed: a blocking check failed (call health, invariants, the quality gate); `reasons` say which and why;
- good: every blocking check passed and its pipeline finished (its tables became current).

A directory without status.json (written before runs recorded their status) is not good either: nothing says its
checks passed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval_assets.redaction import redact_text
from rag_eval_assets.runs.store import RUN_STATUS_FILE

PENDING, FAILED, GOOD = "pending", "failed", "good"
NOT_FINISHED = "its pipeline did not finish (still running, or a later step failed or was stopped)"
NOT_RECORDED = f"no {RUN_STATUS_FILE}: written before runs recorded whether their blocking checks passed"


@dataclass(frozen=True)
class RunStatus:
    state: str
    pipeline: str | None = None
    reasons: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "pipeline": self.pipeline, "reasons": list(self.reasons)}

    def why_not_good(self) -> str | None:
        if self.state == GOOD:
            return None
        if self.state == FAILED:
            return "; ".join(self.reasons) or "a blocking check failed"
        return NOT_FINISHED


def new_status(pipeline: str | None, failures: Iterable[str] = ()) -> RunStatus:
    """The status a run directory is written with: failed when a blocking check is already known to fail."""
    failures = _reasons(failures)
    return RunStatus(FAILED if failures else PENDING, pipeline, failures)


def _reasons(failures: Iterable[str]) -> tuple[str, ...]:
    # A check's description may quote an endpoint's URL; its credentials never reach a file.
    return tuple(redact_text(f) for f in failures)


def read_status(run_dir: Path) -> RunStatus | None:
    """The recorded status; None when the directory has none (or an unreadable one)."""
    try:
        document = json.loads((run_dir / RUN_STATUS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return RunStatus(document.get("state", PENDING), document.get("pipeline"), tuple(document.get("reasons") or ()))


def why_not_good(run_dir: Path) -> str | None:
    """None for a good run, else why it is not one."""
    status = read_status(run_dir)
    return NOT_RECORDED if status is None else status.why_not_good()


def _write(run_dir: Path, status: RunStatus) -> None:
    target = run_dir / RUN_STATUS_FILE
    tmp = target.with_name(f".{RUN_STATUS_FILE}.tmp")
    tmp.write_text(json.dumps(status.as_json(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, target)  # a reader sees the old status or the new one, never half of one


def mark_failed(run_dir: Path, failures: Iterable[str]) -> RunStatus:
    """Record blocking checks that failed after the directory was written (those of run_comparison)."""
    old = read_status(run_dir) or RunStatus(PENDING)
    status = RunStatus(FAILED, old.pipeline, tuple(dict.fromkeys([*old.reasons, *_reasons(failures)])))
    _write(run_dir, status)
    return status


def mark_good(run_dirs: Iterable[Path], pipeline: str | None) -> list[Path]:
    """`pipeline` finished: its pending run directories among `run_dirs` become good; those marked."""
    marked = _pending_of(run_dirs, pipeline)
    for run_dir in marked:
        _write(run_dir, RunStatus(GOOD, pipeline))
    return marked


def mark_pipeline_failed(run_dirs: Iterable[Path], pipeline: str, failures: Iterable[str]) -> list[Path]:
    """`pipeline` ran to its end but could not finish (its tables were not committed): its pending run directories
    among `run_dirs` fail with `failures`; those marked."""
    marked = _pending_of(run_dirs, pipeline)
    for run_dir in marked:
        mark_failed(run_dir, failures)
    return marked


def _pending_of(run_dirs: Iterable[Path], pipeline: str | None) -> list[Path]:
    return [run_dir for run_dir in run_dirs if (status := read_status(run_dir)) is not None
            and status.state == PENDING and status.pipeline == pipeline]
