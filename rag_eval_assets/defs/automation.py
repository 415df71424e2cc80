"""The nightly benchmark: a schedule starts the inputs, a sensor walks the night through the retrieval grid, the
answer grid and the report (metrics, run directory, comparison with the previous night).

Written by hand: Dagster's partitioned-schedule helper refuses a static x static grid. Every request carries one run
key per night, stage and partition, and the sensor never asks again for a run the night already has, so a restarted
daemon never runs a night twice. A night is one pipeline (PIPELINE_TAG `nightly-<night>` on every run): once all its
stages have succeeded, the sensor commits its tables, so a night that fails anywhere leaves the last good night's
tables current.

With `alerts.on` holding `failed`, a failed or canceled nightly run posts one alert through run-status sensors
(running by default: a configured alert is meant to fire). A metrics run that failed because its verdict was worse
is left to the verdict's own alert, so a worse night gives one message, not two.
"""

from collections.abc import Callable

import dagster as dg

from rag_eval_assets.alerts import failure_alert, send, webhook_url
from rag_eval_assets.runs.baseline import verdict_of
from rag_eval_assets.runs.store import run_of_pipeline

from rag_eval_assets.defs.jobs import (
    INPUTS_JOB,
    answer_grid_job,
    commit_pipeline,
    inputs_job,
    metrics_job,
    pipeline_stages,
    retrieval_grid_job,
)
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.settings import Settings

NIGHT_TAG = "rag_eval/night"
NIGHTLY_CRON = "0 2 * * *"
_DONE = dg.DagsterRunStatus.SUCCESS
_FAILED = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


@dg.schedule(job=inputs_job, cron_schedule=NIGHTLY_CRON, execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.STOPPED)
def nightly_benchmark(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """02:00 UTC: freeze the evalset, chunk and index; the sensor below takes the night from there."""
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return dg.RunRequest(run_key=f"nightly-{night}-{INPUTS_JOB}", tags=night_tags(night))


def night_tags(night: str) -> dict[str, str]:
    return {NIGHT_TAG: night, PIPELINE_TAG: f"nightly-{night}"}


def _latest_night(instance: dg.DagsterInstance) -> str | None:
    for run in instance.get_runs(filters=dg.RunsFilter(job_name=INPUTS_JOB), limit=50):
        if NIGHT_TAG in run.tags:
            return run.tags[NIGHT_TAG]
    return None


def nightly_requests(instance: dg.DagsterInstance, stages: list[tuple[str, list[str | None]]],
                     commit: Callable[[str], list[str]]):
    """The run requests the latest night needs next: every partition of the first unfinished stage that has no run
    yet, once the stages before it all succeeded. `stages` = (job name, partition keys) in order, inputs first. When
    every stage has succeeded, `commit(pipeline)` makes the night's tables current (nothing left to commit after
    the first time)."""
    night = _latest_night(instance)
    if night is None:
        return dg.SkipReason("no nightly run yet")
    status: dict[tuple[str, str | None], dg.DagsterRunStatus] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(tags={NIGHT_TAG: night})):
        key = (run.job_name, run.tags.get("dagster/partition"))
        if key not in status:  # newest first: a re-executed partition counts by its latest run
            status[key] = run.status
    for job_name, partitions in stages:
        states = [status.get((job_name, p)) for p in partitions]
        if all(state == _DONE for state in states):
            continue
        failed = [p for p, state in zip(partitions, states) if state in _FAILED]
        if failed:
            return dg.SkipReason(f"night {night}: {job_name} failed for {failed}; re-execute them to continue")
        missing = [p for p, state in zip(partitions, states) if state is None]
        if not missing:
            return dg.SkipReason(f"night {night}: waiting for {job_name}")
        return [
            dg.RunRequest(
                run_key=f"nightly-{night}-{job_name}" + (f"-{p}" if p else ""),
                job_name=job_name,
                partition_key=p,
                tags=night_tags(night),
            )
            for p in missing
        ]
    committed = commit(night_tags(night)[PIPELINE_TAG])
    return dg.SkipReason(f"night {night} is complete" + (f"; committed {len(committed)} tables" if committed else ""))


def failed_run_alert(settings: Settings, run: dg.DagsterRun, error: str | None) -> str:
    """Send the alert of a failed or canceled nightly run; what happened (for the sensor's log and tests)."""
    if NIGHT_TAG not in run.tags:
        return "not a nightly run: no alert"
    written = run_of_pipeline(settings.runs_dir, run.root_run_id or run.run_id)
    verdict = verdict_of(written) if written is not None else None
    if verdict in ("worse", "incompatible"):
        return f"the run failed on its {verdict} verdict, whose own alert covers it"
    url = webhook_url(settings.alerts.webhook_url_env)
    if url is None:
        return f"not sent: alerts.webhook_url_env names {settings.alerts.webhook_url_env}, which is not set"
    alert = failure_alert(run.job_name, run.tags.get("dagster/partition"), run.run_id, run.status.value, error,
                          run.tags[NIGHT_TAG])
    return send(alert, url) or "sent (failed)"


def _first_error(context: dg.RunFailureSensorContext) -> str | None:
    for event in context.get_step_failure_events():
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:
            error = error.cause
        if error is not None:
            return error.message.strip().splitlines()[0][:300]
    return context.failure_event.message


def alert_sensors(settings: Settings) -> list[dg.SensorDefinition]:
    if settings.alerts is None or "failed" not in settings.alerts.on:
        return []

    @dg.run_failure_sensor(name="nightly_failure_alert", default_status=dg.DefaultSensorStatus.RUNNING)
    def nightly_failure_alert(context: dg.RunFailureSensorContext):
        """Posts an alert when a nightly run fails (alerts.on: failed)."""
        context.log.info(failed_run_alert(settings, context.dagster_run, _first_error(context)))

    @dg.run_status_sensor(run_status=dg.DagsterRunStatus.CANCELED, name="nightly_cancel_alert",
                          default_status=dg.DefaultSensorStatus.RUNNING)
    def nightly_cancel_alert(context: dg.RunStatusSensorContext):
        """Posts an alert when a nightly run is canceled (alerts.on: failed)."""
        context.log.info(failed_run_alert(settings, context.dagster_run, "canceled"))

    return [nightly_failure_alert, nightly_cancel_alert]


def automation_defs(settings: Settings) -> dg.Definitions:
    stages = pipeline_stages(settings)

    @dg.sensor(jobs=[retrieval_grid_job, answer_grid_job, metrics_job],
               minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED)
    def nightly_progress(context: dg.SensorEvaluationContext):
        """Starts the next stage of the latest night once the previous one has succeeded; the report comes last."""
        return nightly_requests(context.instance, stages, lambda pipeline: commit_pipeline(settings, pipeline))

    return dg.Definitions(schedules=[nightly_benchmark], sensors=[nightly_progress, *alert_sensors(settings)])
