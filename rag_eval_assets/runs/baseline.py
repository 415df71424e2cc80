"""Which run a new run is compared with, accepting a run as a baseline by hand, and pruning old run directories
(retention.keep_runs).

The policy, recorded in every comparison.json under "baseline":
- `report.baseline_run_id` pins one run;
- otherwise the baseline is the newest earlier run of the same evalset that is *good* (runs/status.py: every
  blocking check passed, call health, invariants and quality gate, and its pipeline finished), or that a person
  accepted (`rag-eval baseline accept RUN`, or the `accept_baseline` job in the UI).

A broken night (worse, an LLM outage, a crash) is therefore compared with the last good one, and so is the next
broken night: a regression stays `worse` until it is fixed or accepted, and a night whose calls failed never becomes
the baseline that makes the next night look fine or bad.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.runs.listing import list_runs, run_eval_set_version
from rag_eval_assets.runs.status import why_not_good
from rag_eval_assets.runs.store import COMPARISON_JSON, TIMESTAMP_FORMAT, Run, read_run

ACCEPTED_FILE = "accepted.json"
PINNED = "pinned by report.baseline_run_id"
NEWEST_GOOD = ("newest earlier run of the same evalset whose blocking checks passed and whose pipeline finished, "
               "or that was accepted")


@dataclass(frozen=True)
class Skipped:
    """A newer run of the evalset passed over, and why."""

    run_id: str
    why: str


@dataclass(frozen=True)
class Baseline:
    path: Path | None
    policy: str
    skipped: tuple[Skipped, ...] = ()

    def record(self) -> dict[str, Any]:
        return {"run_id": self.path.name if self.path else None, "policy": self.policy,
                "skipped": [{"run_id": s.run_id, "why": s.why} for s in self.skipped]}

    @classmethod
    def recorded(cls, path: Path, record: Mapping[str, Any]) -> Baseline:
        """The baseline as a comparison.json recorded it (`record`: its "baseline"), at `path`."""
        return cls(path, record.get("policy", NEWEST_GOOD),
                   tuple(Skipped(s["run_id"], s["why"]) for s in record.get("skipped") or ()))


def verdict_of(run_dir: Path) -> str | None:
    """The verdict of the run against its own baseline; None for a run that had none."""
    try:
        return json.loads((run_dir / COMPARISON_JSON).read_text(encoding="utf-8"))["verdict"]
    except FileNotFoundError:
        return None


def why_not_baseline(run_dir: Path) -> str | None:
    """None when the run may be a baseline (accepted by hand, or good), else why not."""
    return None if (run_dir / ACCEPTED_FILE).is_file() else why_not_good(run_dir)


def choose_baseline(
    runs_dir: str | Path,
    eval_set_version: str | None,
    *,
    pinned: str | None = None,
    config_file: str = "rag_eval.yaml",
    before: str | None = None,
) -> Baseline:
    """The baseline of a run of `eval_set_version`. `before`: the run's own id when it already has a directory
    (a re-execution): only runs listed after it, i.e. created earlier, qualify."""
    runs_dir = Path(runs_dir)
    if pinned is not None:
        path = runs_dir / pinned
        if not path.is_dir():
            raise InputError([InputProblem(config_file, None, "report.baseline_run_id", f"no run directory {path}")])
        return Baseline(path, PINNED)
    runs = list_runs(runs_dir)
    if before is not None:
        names = [p.name for p in runs]
        runs = runs[names.index(before) + 1:] if before in names else runs
    skipped = []
    for path in runs:
        if run_eval_set_version(path) != eval_set_version:
            continue
        why = why_not_baseline(path)
        if why is None:
            return Baseline(path, NEWEST_GOOD, tuple(skipped))
        skipped.append(Skipped(path.name, why))
    return Baseline(None, NEWEST_GOOD, tuple(skipped))


def baseline_of_run(
    runs_dir: str | Path,
    eval_set_version: str | None,
    existing: Run | None,
    *,
    pinned: str | None = None,
    config_file: str = "rag_eval.yaml",
) -> Baseline:
    """The baseline of a run about to be written: for a run being rewritten (`existing`, a re-execution) the one it
    recorded, so that its verdict stays what it was; else by the policy (choose_baseline)."""
    if existing is not None and existing.comparison is not None:
        path = Path(runs_dir) / existing.comparison["base_run_id"]
        if path.is_dir():
            return Baseline.recorded(path, existing.comparison.get("baseline") or {})
    return choose_baseline(runs_dir, eval_set_version, pinned=pinned, config_file=config_file,
                           before=existing.run_id if existing else None)


def accept(run_dir: str | Path, note: str | None = None, now: datetime | None = None) -> Path:
    """Mark a run as an accepted baseline (written atomically); later runs of its evalset compare with it, even when
    it is not good (worse, failed calls, an unfinished pipeline)."""
    run = read_run(run_dir)  # InputError naming what is missing when this is no run directory
    target = run.path / ACCEPTED_FILE
    record = {
        "run_id": run.run_id,
        "accepted_at": (now or datetime.now(timezone.utc)).strftime(TIMESTAMP_FORMAT),
        "verdict": verdict_of(run.path),
        "not_good": why_not_good(run.path),  # what accepting it overrides, if anything
        "note": note,
    }
    tmp = target.with_name(f".{ACCEPTED_FILE}.tmp")
    tmp.write_text(json.dumps(record, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


def prune_runs(runs_dir: str | Path, eval_set_version: str | None, keep: int, protect: Iterable[Path] = ()) -> list[Path]:
    """Delete the run directories of `eval_set_version` beyond the newest `keep`, except runs accepted by hand and
    `protect` (the baseline in use); the deleted paths, oldest last."""
    kept = {Path(p).resolve() for p in protect}
    ours = [p for p in list_runs(runs_dir) if run_eval_set_version(p) == eval_set_version]
    removed = []
    for path in ours[keep:]:
        if (path / ACCEPTED_FILE).is_file() or path.resolve() in kept:
            continue
        shutil.rmtree(path)
        removed.append(path)
    return removed


def apply_retention(runs_dir: str | Path, run_dir: Path, keep: int | None, baseline: Path | None) -> str | None:
    """retention.keep_runs once a run's gate has passed: prune_runs over the run's evalset, sparing the run and its
    baseline; what happened, or None without retention.keep_runs."""
    if keep is None:
        return None
    removed = prune_runs(runs_dir, run_eval_set_version(run_dir), keep,
                         protect=[run_dir, *([baseline] if baseline else [])])
    return f"kept the newest {keep} runs of this evalset; removed {len(removed)}" + (
        f": {', '.join(p.name for p in removed)}" if removed else "")
