"""The pipeline's runs as `rag-eval` shows them on the terminal, read from Dagster's events: one line per run and per
asset check as each run ends, why a failed run failed (the error our code raised, not Dagster's wrapper around it),
then one line per asset (and partition): materialized with its row count, up to date, or why it still needs a run."""

from __future__ import annotations

import re
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


def execute_pipeline(
    defs: dg.Definitions, settings: Settings, instance: dg.DagsterInstance, log: RunLog, force: bool,
    on_cluster: Callable[[Step, str, Mapping[str, str]], RunResult] | None = None,
) -> Executed:
    """Materialize what is missing or stale through the jobs (everything with `force`; the fanning-out ones through
    `on_cluster`, see run_pipeline), saying each run's outcome as it ends; then print the state of every asset (and
    partition)."""
    errors: list[str] = []
    failed_run = None
    input_error = False
    with log:  # everything the runs log, from here on, goes to the log file
        for line in recover_dead_runs(instance):
            print(f"rag-eval: recovered {line}")

        def say(line: str) -> None:
            # Said while a run executes: on the terminal's own descriptor (run_log.py says why).
            print(f"rag-eval: {line}", file=log.stdout, flush=True)

        def around(run_id: str):
            log.listen(instance, run_id)
            return watching(instance, run_id, say)

        materialized: dict[tuple, str] = {}
        unfinished: dict[tuple, str] = {}  # what a failed run was to materialize
        last_run = None
        try:
            for step in run_pipeline(defs, settings, instance, tags=own_tags(), around=around, force=force,
                                     on_cluster=on_cluster):
                last_run = step.result.run_id
                if on_cluster is not None and step.job in CLUSTER_JOBS:  # its steps' events are the workers'
                    log.catch_up(instance, last_run)
                label = step.job + (f" [{step.partition}]" if step.partition else "")
                print(f"{label}: {'succeeded' if step.result.success else 'FAILED'} (run {step.result.run_id})")
                materialized.update(_materialized(step.result))
                failed_checks = _checks(step.result)
                if not step.result.success:
                    failed_run = step.result.run_id
                    unfinished.update(dict.fromkeys(((key, step.partition) for key in step.assets),
                                                    f"not run: its run {failed_run} failed"))
                    # A failed blocking check says why in its own description; Dagster's error only names it.
                    errors += failed_checks
                    step_errors, raised_on_input = _step_errors(step.result, failed_checks)
                    errors += step_errors
                    input_error |= raised_on_input
        except CommitConflict as exc:  # every run succeeded, but the tables could not become current
            failed_run = last_run
            errors.append(str(exc))
        planner = Planner(defs.resolve_asset_graph(), settings, instance)
        for key, partition, why in planner.listing(pipeline_stages(settings)):
            # An asset its failed run did not get to is no more up to date than a stale one.
            state = materialized.get((key, partition)) or (f"not run: {why}" if why else None) \
                or unfinished.get((key, partition), "up to date")
            print(f"  {key.to_user_string() + (f'[{partition}]' if partition else ''):<44} {state}")
    return Executed(failed_run, errors, input_error)


def _materialized(result: RunResult) -> dict[tuple, str]:
    """(asset key, partition): 'materialized' with the row count, when the asset gives one."""
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        rows = mat.metadata.get("dagster/row_count")
        out[(mat.asset_key, mat.partition)] = "materialized" + (f", {rows.value} rows" if rows else "")
    return out


def _checks(result: RunResult) -> list[str]:
    """Print each check's outcome; why each failed one failed."""
    failed = []
    for check in result.get_asset_check_evaluations():
        name = f"{check.asset_key.to_user_string()}:{check.check_name}"
        print(f"  check {name} {'passed' if check.passed else 'FAILED'}")
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
