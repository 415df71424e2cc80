"""What a night is and how it ended, read from the instance: a night is one run of nightly_job (tagged NIGHT_TAG),
whose op executes the pipeline's runs (each tagged with the night and its PIPELINE_TAG) in its own process
(defs/night_run.py). A night that stops says what it is: its verdict (WORSE with the deciding cells, INCOMPATIBLE
with the reason) when its report's gate stopped it, else the failed step with its error and what to do."""

from __future__ import annotations

from datetime import datetime

import dagster as dg

from rag_eval_assets.errors import InfrastructureError
from rag_eval_assets.redaction import redact_text
from rag_eval_assets.reports.night_verdict import night_verdict
from rag_eval_assets.runs.listing import run_of_pipeline
from rag_eval_assets.settings import Settings

from rag_eval_assets.defs.jobs import METRICS_JOB
from rag_eval_assets.defs.resources import ConfigChangedError
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG

NIGHT_TAG = "rag_eval/night"
NIGHTLY_JOB = "nightly_job"
PARTITION_TAG = "dagster/partition"
INPUT_ERROR = 2  # a night that cannot run as configured: INCOMPATIBLE, or a file the code location did not load
# The night's own errors that a setting fixes: rag_eval.yaml edited since the code location loaded it, a cluster or
# store that did not answer.
SETTING_ERRORS = (ConfigChangedError.__name__, InfrastructureError.__name__)
ENDED_BADLY = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def on_demand_night(now: datetime) -> str:
    """The name of a night started now: its UTC start to the second, never a scheduled night's date (their run keys
    would clash)."""
    return f"{now:%Y-%m-%dT%H%M%SZ}"


def night_tags(night: str) -> dict[str, str]:
    return {NIGHT_TAG: night, PIPELINE_TAG: f"nightly-{night}"}


def night_pipeline(night: str, run: dg.DagsterRun) -> str:
    """The pipeline of a night's run: `nightly-<night>`, and for a re-execution of it one of its own, so that it
    redoes what its failed parent left uncommitted rather than commit it (a worse report among it)."""
    return f"nightly-{night}" if run.parent_run_id is None else f"nightly-{night}-{run.run_id[:8]}"


def pipeline_runs(instance: dg.DagsterInstance, night_run: dg.DagsterRun) -> list[dg.DagsterRun]:
    """The pipeline's runs `night_run` executed (newest first). Its pipeline from its night and whether it is a
    re-execution, not from its tag: a re-execution carries its parent's until its op starts."""
    night = night_run.tags.get(NIGHT_TAG)
    if night is None:
        return []
    return [run for run in instance.get_runs(dg.RunsFilter(tags={PIPELINE_TAG: night_pipeline(night, night_run)}))
            if run.job_name != NIGHTLY_JOB]


def night_run_dir(settings: Settings, runs: list[dg.DagsterRun]):
    """The run directory of the newest finished metrics run of `runs` (None when it wrote none)."""
    metrics = next((run for run in runs if run.job_name == METRICS_JOB and run.is_finished), None)
    return run_of_pipeline(settings.runs_dir, metrics.root_run_id or metrics.run_id) if metrics else None


def night_failure(settings: Settings, instance: dg.DagsterInstance, night_run: dg.DagsterRun) -> tuple[str, int]:
    """Why the night of `night_run` (finished, failed or canceled) stopped, and the exit code `rag-eval nightly
    --wait` gives: its verdict when the report ran and its gate failed on it (WORSE with the deciding cells, 1;
    INCOMPATIBLE with the reason, 2); else, when it was canceled, that (1); else the failed run with its error and
    the advice to re-execute the night (1); else the night's own error (a configuration edited since the code
    location loaded it, or a cluster or store that did not answer: 2)."""
    runs = pipeline_runs(instance, night_run)
    failed = next((run for run in runs if run.status in ENDED_BADLY), None)
    if night_run.status == dg.DagsterRunStatus.CANCELED:  # what it was running then failed on the interrupt
        return f"{NIGHTLY_JOB} was canceled" + (f" while {_label(failed)} ran" if failed else ""), 1
    again = (f"re-execute the night's run {night_run.run_id} in the UI (it redoes what is not committed; after "
             "an edit of rag_eval.yaml, reload the code location first), or start another night")
    if failed is not None:
        if failed.job_name == METRICS_JOB:
            verdict = night_verdict(night_run_dir(settings, runs))
            if verdict is not None and verdict[1] != 0:
                return verdict
        return f"{_label(failed)} {run_error(instance, failed)}; {again}", 1
    failure = _failure(instance, night_run)
    if failure is not None and failure[1] in SETTING_ERRORS:  # a setting to fix: said as it is, no re-execution
        return failure[2], INPUT_ERROR
    return f"{NIGHTLY_JOB} {run_error(instance, night_run)}; {again}", 1


def _label(run: dg.DagsterRun) -> str:
    partition = run.tags.get(PARTITION_TAG)
    return f"{run.job_name}{f'[{partition}]' if partition else ''}"


def run_error(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """'failed at step S: Error: message' (the error our code raised, not Dagster's wrapper), a failed check's
    description, or 'was canceled'."""
    if run.status == dg.DagsterRunStatus.CANCELED:
        return "was canceled"
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        check = entry.dagster_event.event_specific_data
        if not check.passed:  # a blocking check: its description says why, Dagster's error only names it
            return (f"failed its check {check.asset_key.to_user_string()}:{check.check_name}: "
                    f"{one_line(check.description or 'no description')}")
    failure = _failure(instance, run)
    if failure is None:
        return "failed"
    where, cls_name, message = failure
    return f"failed{f' at step {where}' if where else ''}: {f'{cls_name}: ' if cls_name else ''}{message}"


def _failure(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[str | None, str, str] | None:
    """(the failed step, None for the run's own failure; the class and message of the error our code raised, not
    of Dagster's wrappers around it, no class when the run's failure names none), or None when nothing failed."""
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        return entry.step_key, *_cause(entry.dagster_event.step_failure_data.error)
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        error = getattr(entry.dagster_event.event_specific_data, "error", None)
        return None, *(_cause(error) if error is not None else ("", one_line(entry.message)))
    return None


def _cause(error) -> tuple[str, str]:
    chain = [error]
    while chain[-1].cause is not None:
        chain.append(chain[-1].cause)
    error = next((e for e in chain if not e.cls_name.startswith("Dagster")), chain[-1])
    # Dagster's message starts with the class's dotted path; the lines after the first say which input.
    return error.cls_name, one_line(error.message.strip().split(f"{error.cls_name}: ", 1)[-1])


def one_line(text: str) -> str:
    return redact_text(" ".join(line.strip() for line in text.strip().splitlines())[:400])
