"""The nightly benchmark: at 02:00 a schedule starts the night, one run of nightly_job (defs/night_run.py) that
materializes what is missing or stale through the pipeline's stages, as `rag-eval run` does (defs/staleness.py),
and commits its tables; a service under test is called every night. One run key per night, so a restarted daemon
never runs a night twice. `rag-eval nightly` starts a night now with the schedule's request
(defs/night_on_demand.py). The schedule never requests a night from a rag_eval.yaml edited since the code location
loaded it (defs/loaded_config.py).

With `alerts.on` holding `failed`, a night's run that failed or was canceled posts one alert through run-status
sensors (running by default: a configured alert is meant to fire); a failed `rag-eval run` posts its own
(cli/pipeline.py), through the same failed_run_alert. A night that failed because its verdict was worse is left
to the verdict's own alert when `alerts.on` holds that verdict, so a worse night gives one message, not two; a
verdict it leaves out (INCOMPATIBLE by default) is this alert's, so every night that does not end well posts one.
"""

import json
from pathlib import Path

import dagster as dg

from rag_eval_assets.alerts import failure_alert, send, send_once, verdict_alert, webhook_url
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.runs.baseline import verdict_of
from rag_eval_assets.runs.listing import run_eval_set_version
from rag_eval_assets.runs.status import FAILED, read_status
from rag_eval_assets.runs.store import COMPARISON_JSON

from rag_eval_assets.defs.loaded_config import CONFIG_TAG, changed_since, config_sha256
from rag_eval_assets.defs.night_run import ClusterRuns, CodeLocation, nightly_job
from rag_eval_assets.defs.night_story import (
    NIGHT_TAG, NIGHTLY_JOB, PARTITION_TAG, night_failure, night_run_dir, night_tags, pipeline_runs,
)
from rag_eval_assets.settings import Settings

NIGHTLY_CRON = "0 2 * * *"


def night_request(night: str, settings: Settings) -> dg.RunRequest:
    """The run of `night`: one run key per night; the sha256 of the file it was requested from, which its run
    checks it still reads (defs/loaded_config.py)."""
    return dg.RunRequest(run_key=f"nightly-{night}", job_name=NIGHTLY_JOB,
                         tags={**night_tags(night), CONFIG_TAG: config_sha256(settings.config_file)})


def nightly_run_alert(settings: Settings, instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The sensors' alert: for a night's run, not for the pipeline's runs it executed (their failure is its own)
    nor for any other run (`rag-eval run` sends its own, and needs no daemon)."""
    if run.job_name != NIGHTLY_JOB:
        return "not a night's run: no alert"
    error = night_failure(settings, instance, run)[0]
    return failed_run_alert(settings, run, error, night_run_dir(settings, pipeline_runs(instance, run)))


def failed_run_alert(settings: Settings, run: dg.DagsterRun, error: str | None, written: Path | None) -> str:
    """Send the alert of a failed or canceled run, whose run directory is `written` (None: it wrote none); what
    happened (for the sensor's log, the terminal and tests). The failed checks its run directory recorded say why
    better than Dagster's error, which only names them."""
    verdict = verdict_of(written) if written is not None else None
    if verdict in ("worse", "incompatible") and verdict in settings.alerts.on:
        return f"the run failed on its {verdict} verdict, whose own alert covers it"
    url = webhook_url(settings.alerts.webhook_url_env)
    if url is None:
        return f"not sent: alerts.webhook_url_env names {settings.alerts.webhook_url_env}, which is not set"
    if verdict in ("worse", "incompatible"):  # a verdict alerts.on leaves out: the night's one alert is its verdict's
        comparison = json.loads((written / COMPARISON_JSON).read_text(encoding="utf-8"))
        alert = verdict_alert(comparison, written, written / REPORT_FILE, str(run_eval_set_version(written)))
        return send_once(alert, url, written)
    status = read_status(written) if written is not None else None
    if status is not None and status.state == FAILED:
        error = "; ".join(status.reasons)
    alert = failure_alert(run.job_name, run.tags.get(PARTITION_TAG), run.run_id, run.status.value, error,
                          run.tags.get(NIGHT_TAG), written)
    return send(alert, url) or "sent (failed)"


def alert_sensors(settings: Settings) -> list[dg.SensorDefinition]:
    if settings.alerts is None or "failed" not in settings.alerts.on:
        return []

    @dg.run_failure_sensor(name="nightly_failure_alert", default_status=dg.DefaultSensorStatus.RUNNING)
    def nightly_failure_alert(context: dg.RunFailureSensorContext):
        """Posts an alert when a night fails (alerts.on: failed)."""
        context.log.info(nightly_run_alert(settings, context.instance, context.dagster_run))

    @dg.run_status_sensor(run_status=dg.DagsterRunStatus.CANCELED, name="nightly_cancel_alert",
                          default_status=dg.DefaultSensorStatus.RUNNING)
    def nightly_cancel_alert(context: dg.RunStatusSensorContext):
        """Posts an alert when a night is canceled (alerts.on: failed)."""
        context.log.info(nightly_run_alert(settings, context.instance, context.dagster_run))

    return [nightly_failure_alert, nightly_cancel_alert]


def automation_defs(settings: Settings, code_location: CodeLocation, cluster: ClusterRuns | None) -> dg.Definitions:
    """The night's job (its runs made from `code_location()`, reaching the cluster through `cluster`), its schedule
    and the alert sensors."""
    # What the file was when these definitions read it: a tick requests nothing from an edited file.
    loaded = config_sha256(settings.config_file)
    job = nightly_job(code_location, cluster)

    @dg.schedule(job=job, cron_schedule=NIGHTLY_CRON, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.STOPPED)
    def nightly_benchmark(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        """02:00 UTC: the night, what is missing or stale through every stage, then its tables commit."""
        changed = changed_since(settings.config_file, loaded)
        if changed is not None:
            return dg.SkipReason(changed)
        return night_request(context.scheduled_execution_time.strftime("%Y-%m-%d"), settings)

    return dg.Definitions(jobs=[job], schedules=[nightly_benchmark], sensors=alert_sensors(settings))
