"""The comparison with the baseline as a table of its own, the gate as its blocking asset checks, then the
verdict's alert and retention."""

import json
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval_assets.alerts import alert_on_verdict
from rag_eval_assets.defs.metadata import run_versions_of, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.defs.storage.parquet_io_manager import pipeline_of_run
from rag_eval_assets.reports.comparison import (
    COMPARISON_COLUMNS,
    DELTA_HEADERS,
    comparison_frame,
    delta_rows,
    evidence_metadata,
    gate_settings_line,
    gate_table_markdown,
    notes_markdown,
    quality_gate_description,
    recorded_verdict,
)
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.reports.markdown import capped_table
from rag_eval_assets.runs.baseline import apply_retention
from rag_eval_assets.runs.status import mark_failed, mark_good
from rag_eval_assets.runs.store import COMPARISON_JSON
from rag_eval_assets.settings import Settings
from rag_eval_assets.verdict.compare import EXIT_CODES, VERDICT_SCORE

# Dagster stores metadata in its event log: previews of a bounded number of rows, each table whole up to there.
PREVIEW_ROWS = 40
NO_BASELINE = "no baseline run yet: nothing to compare; this run becomes the baseline of the next"


def check_failures(asset: str, checks: list[dg.AssetCheckResult]) -> list[str]:
    """The failed checks as `rag-eval` names them: "check evaluation_run:call_health failed: why"."""
    return [f"check {asset}:{c.check_name} failed: {c.description or 'no description'}" for c in checks if not c.passed]


def verdict_metadata(comparison: dict | None) -> dict[str, dg.MetadataValue]:
    """The verdict first, then the whole gate table (one row per retriever and k that moved, never cut; one line
    for the cells identical in both runs)."""
    if comparison is None:
        return {"verdict": dg.MetadataValue.text(NO_BASELINE)}
    return {
        "verdict": dg.MetadataValue.text(recorded_verdict(comparison)),
        "verdict_score": dg.MetadataValue.float(VERDICT_SCORE[comparison["verdict"]]),
        "gate": dg.MetadataValue.md(
            gate_settings_line(comparison["gate"]) + "\n\n"
            + gate_table_markdown(comparison["cells"], comparison["deciding_cells"]) + notes_markdown(comparison["cells"])
        ),
    }


@dg.asset(
    group_name="report",
    kinds={"pandas", "parquet"},
    code_version="1",
    check_specs=[
        dg.AssetCheckSpec("invariants_match", asset="run_comparison", blocking=True,
                          description="Evalset, corpus and judge are the baseline's (seed 000 / 002 invariants)."),
        dg.AssetCheckSpec("quality_gate", asset="run_comparison", blocking=True,
                          description="No gated cell is significantly worse than the baseline (report.gate)."),
    ],
)
def run_comparison(context: dg.AssetExecutionContext, settings: RagEvalSettings, evaluation_run: pd.DataFrame):
    """The run's comparison with its baseline, one row per (retriever, k, metric) with deltas, intervals and
    p-values; the gate's rows (gate = true) carry the corrected p-value and the cell's result. Sends the verdict's
    alert (alerts.on) and, when the gate passes, prunes old run directories (retention.keep_runs)."""
    s = settings.load()
    current = evaluation_run.iloc[0]
    run_dir = Path(current["run_dir"])
    versions = version_metadata(run_versions_of(context, s))
    comparison_file = run_dir / COMPARISON_JSON
    if not comparison_file.is_file():
        yield dg.Output(pd.DataFrame(columns=list(COMPARISON_COLUMNS)),
                        metadata={**verdict_metadata(None), **versions, **_housekeeping(context, s, run_dir, None)})
        yield from _record_status(context, run_dir, [
            dg.AssetCheckResult(check_name=name, passed=True, description=NO_BASELINE,
                                metadata={"status": "nothing to check", "reason": "no baseline run yet"})
            for name in ("invariants_match", "quality_gate")])
        return
    comparison = json.loads(comparison_file.read_text(encoding="utf-8"))
    incompatible = "; ".join(comparison["incompatible"])
    checks = [
        dg.AssetCheckResult(check_name="invariants_match", passed=not incompatible, description=incompatible or None),
        dg.AssetCheckResult(check_name="quality_gate", passed=EXIT_CODES[comparison["verdict"]] == 0,
                            description=quality_gate_description(comparison),
                            metadata={"verdict": comparison["verdict"],
                                      "deciding_cells": ", ".join(comparison["deciding_cells"])}),
    ]
    if failures := check_failures("run_comparison", checks):
        mark_failed(run_dir, failures)  # before the output, so that no later failure can skip it
    where = f"the run_comparison table and {comparison_file}"
    yield dg.Output(
        comparison_frame(comparison),
        metadata={
            **verdict_metadata(comparison),
            "evidence": dg.MetadataValue.md(evidence_metadata(comparison)),
            "baseline_run_id": comparison["base_run_id"],
            "exit_code": comparison["exit_code"],
            "regressions": comparison["regressions"],
            "improvements": comparison["improvements"],
            "metric_deltas": dg.MetadataValue.md(
                capped_table(DELTA_HEADERS, delta_rows(comparison["deltas"]), PREVIEW_ROWS, where)
            ),
            **versions,
            **_housekeeping(context, s, run_dir, comparison),
        },
    )
    yield from _record_status(context, run_dir, checks)


def _record_status(context: dg.AssetExecutionContext, run_dir: Path,
                   checks: list[dg.AssetCheckResult]) -> Iterator[dg.AssetCheckResult]:
    """Yield the checks; a run outside any pipeline whose checks all passed is good now (nothing commits later;
    a pipeline's runs become good when it commits: defs/jobs.py commit_pipeline)."""
    yield from checks
    if all(c.passed for c in checks) and pipeline_of_run(context.run, context.instance) is None:
        mark_good([run_dir], None)


def _housekeeping(context: dg.AssetExecutionContext, s: Settings, run_dir: Path, comparison: dict | None) -> dict:
    """The verdict's alert, then retention once the gate has passed; what happened, as metadata."""
    done: dict[str, str] = {}
    alert = alert_on_verdict(s.alerts, comparison, run_dir, run_dir / REPORT_FILE)
    if alert is not None:
        done["alert"] = alert.text
        if alert.warning:
            context.log.warning(alert.text)
        else:
            context.log.info(f"alert: {alert.text}")
    if comparison is None or EXIT_CODES[comparison["verdict"]] == 0:
        baseline = s.runs_dir / comparison["base_run_id"] if comparison else None
        if (retention := apply_retention(s.runs_dir, run_dir, s.retention.keep_runs, baseline)) is not None:
            done["retention"] = retention
            context.log.info(retention)
    return done
