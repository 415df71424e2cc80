"""The pipeline's runs as `rag-eval` shows them on the terminal, read from Dagster's events: one line per run and per
asset check as each run ends (progress, on stderr), why a failed run failed (the error our code raised, not
Dagster's wrapper around it), and one line per asset (and partition): materialized with its row count, failed, up to
date, or why it did not run (a failed run's assets, and after a failure whatever lies downstream of what did not
run, never "up to date")."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import dagster as dg

from rag_eval_assets.credentials import CredentialError
from rag_eval_assets.defs.jobs import CLUSTER_JOBS, RunResult, pipeline_stages, run_pipeline
from rag_eval_assets.defs.run_guard import own_tags, recover_dead_runs, watching
from rag_eval_assets.defs.run_log import RunLog
from rag_eval_assets.defs.staleness import Planner, Step
from rag_eval_assets.defs.storage.table_store import CommitConflict
from rag_eval_assets.errors import InputError
from rag_eval_assets.redaction import redact_text
from rag_eval_assets.settings import Settings


@dataclass(frozen=True)
class Executed:
    failed_run: str | None  # the Dagster run that failed; None when every run succeeded
    errors: list[str]  # why it failed: the failed checks (name and description) and the steps' errors
    input_error: bool  # whether an input error (a file, line and field) was why
    listing: list[str]  # one line per asset (and partition): what became of it


def execute_pipeline(
    defs: dg.Definitions, settings: Settings, instance: dg.DagsterInstance, log: RunLog, force: bool,
    on_cluster: Callable[[Step, str, Mapping[str, str]], RunResult] | None = None,
) -> Executed:
    """Materialize what is missing or stale through the jobs (everything with `force`; the fanning-out ones through
    `on_cluster`, see run_pipeline), saying each run's outcome on stderr as it ends; then the state of every asset
    (and partition), for the caller to print after why the pipeline failed, if it did."""
    errors: list[str] = []
    failed_run = None
    input_error = False
    with log:  # everything the runs log, from here on, goes to the log file
        for line in recover_dead_runs(instance):
            print(f"rag-eval: recovered {line}", file=sys.stderr)

        def say(line: str) -> None:
            # Said while a run executes: on the terminal's own descriptor (run_log.py says why).
            print(f"rag-eval: {line}", file=log.stderr, flush=True)

        def around(run_id: str):
            log.listen(instance, run_id)
            return watching(instance, run_id, say)

        materialized: dict[tuple, str] = {}
        unfinished: dict[tuple, str] = {}  # what a failed run was to materialize
        failed: dict[tuple, str] = {}  # the assets whose steps failed
        last_run = None
        try:
            for step in run_pipeline(defs, settings, instance, tags=own_tags(), around=around, force=force,
                                     on_cluster=on_cluster):
                last_run = step.result.run_id
                if on_cluster is not None and step.job in CLUSTER_JOBS:  # its steps' events are the workers'
                    log.catch_up(instance, last_run)
                label = step.job + (f" [{step.partition}]" if step.partition else "")
                # Progress, on stderr: stdout tells the outcome, beginning with why the pipeline failed, if it did.
                print(f"{label}: {'succeeded' if step.result.success else 'FAILED'} (run {step.result.run_id})",
                      file=sys.stderr, flush=True)
                materialized.update(_materialized(step.result))
                failed_checks = _checks(step.result)
                if not step.result.success:
                    failed_run = step.result.run_id
                    unfinished.update(dict.fromkeys(((key, step.partition) for key in step.assets),
                                                    f"not run: its run {failed_run} failed"))
                    failed_steps = _failed_step_keys(step.result)
                    failed.update({(key, step.partition): f"FAILED in run {failed_run}" for key in step.assets
                                   if key.to_python_identifier() in failed_steps})
                    # A failed blocking check says why in its own description; Dagster's error only names it.
                    errors += failed_checks
                    step_errors, raised_on_input = _step_errors(step.result, failed_checks)
                    errors += step_errors
                    input_error |= raised_on_input
        except CommitConflict as exc:  # every run succeeded, but the tables could not become current
            failed_run = last_run
            errors.append(str(exc))
        listing = _listing(Planner(defs.resolve_asset_graph(), settings, instance), pipeline_stages(settings),
                           {**unfinished, **failed, **materialized}, stopped=failed_run is not None)
    return Executed(failed_run, errors, input_error, listing)


def _listing(planner: Planner, stages, happened: dict[tuple, str], stopped: bool) -> list[str]:
    """One line per asset (and partition), in pipeline order: what `happened` to it in this pipeline (materialized,
    failed, or not run by its failed run), else why it needs a run, else up to date. Once the pipeline stopped, an
    asset downstream of one that did not run (of the same partition, or of any when either has none) is not up to
    date either: it would have run after it."""
    not_done: set[tuple] = set()
    lines = []
    for key, partition, why in planner.listing(stages):
        state = happened.get((key, partition))
        if state is None or (why and state.startswith("not run")):
            state = f"not run: {why}" if why else state
        parents = planner.asset_graph.get(key).parent_keys
        if state is None and stopped and any(
                parent in parents and (p is None or partition is None or p in (partition, *partition.split("|")))
                for parent, p in not_done):
            state = "not run: the pipeline stopped before it"
        if state is None:
            state = "up to date"
        elif not state.startswith("materialized"):
            not_done.add((key, partition))
        lines.append(f"  {key.to_user_string() + (f'[{partition}]' if partition else ''):<44} {state}")
    return lines


def _materialized(result: RunResult) -> dict[tuple, str]:
    """(asset key, partition): 'materialized' with the row count, when the asset gives one."""
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        rows = mat.metadata.get("dagster/row_count")
        out[(mat.asset_key, mat.partition)] = "materialized" + (f", {rows.value} rows" if rows else "")
    return out


def _failed_step_keys(result: RunResult) -> set[str]:
    return {event.step_key for event in result.all_events if event.is_step_failure}


def _checks(result: RunResult) -> list[str]:
    """Print each check's outcome (progress, on stderr); why each failed one failed."""
    failed = []
    for check in result.get_asset_check_evaluations():
        name = f"{check.asset_key.to_user_string()}:{check.check_name}"
        print(f"  check {name} {'passed' if check.passed else 'FAILED'}", file=sys.stderr, flush=True)
        if not check.passed:
            failed.append(f"check {name} failed: {redact_text(check.description or 'no description')}")
    return failed


def _step_errors(result: RunResult, failed_checks: list[str]) -> tuple[list[str], bool]:
    """One line per failed step (none for a blocking check that failed: its line says why), and whether an input
    error was among them."""
    errors = []
    input_error = False
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            # Dagster wraps the error our code raised: that one says why (and names the file or setting); what it
            # was raised from is the library's view, kept in the log.
            chain = [event.step_failure_data.error]
            while chain[-1].cause is not None:
                chain.append(chain[-1].cause)
            error = next((e for e in chain if not e.cls_name.startswith("Dagster")), chain[-1])
            input_error |= error.cls_name in (InputError.__name__, CredentialError.__name__)
            if error.cls_name != "DagsterAssetCheckFailedError" or not failed_checks:
                # Dagster's message begins with the class name, which says nothing to whoever fixes the input.
                message = re.sub(rf"^(\w+\.)*{re.escape(error.cls_name)}: ", "", error.message.strip())
                errors.append(f"{event.step_key}: {redact_text(message)}")
    if not errors and not failed_checks:
        # No step failed: the run failed around its steps (its executor: a cluster that went away meanwhile).
        for event in result.all_events:
            data = event.event_specific_data if event.event_type == dg.DagsterEventType.RUN_FAILURE else None
            error = getattr(data, "error", None)
            if error is not None:
                while error.cause is not None and error.cls_name.startswith("Dagster"):
                    error = error.cause
                why = redact_text(error.message.strip())
                errors.append(f"{result.dagster_run.job_name}: {error.cls_name}: {why}")
    return errors, input_error
