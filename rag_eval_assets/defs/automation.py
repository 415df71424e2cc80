"""The nightly benchmark: at 02:00 a schedule starts the night with what the inputs need (else the evalset and corpus
fingerprints alone), and a sensor walks the night through the services under test, the retrieval grid, the answer
grid and the report (metrics, run directory, comparison with the previous night), materializing only what is missing
or stale, as `rag-eval run` does (defs/staleness.py); a service under test is called every night.

Written by hand: Dagster's partitioned-schedule helper refuses a static x static grid, and its stale-only run
requests cannot follow a pipeline's stages. Every request carries one run key per night, job and partition, and the
sensor never asks again for a (job, partition) the night already ran, so a restarted daemon never runs a night twice.
A night is one pipeline (PIPELINE_TAG `nightly-<night>` on every run): once nothing is left to run, the sensor
commits its tables, so a night that fails anywhere leaves the last good night's tables current. `rag-eval nightly`
starts a night now with the schedule's first request (defs/night_on_demand.py). A night that stops says what it
is: its verdict (WORSE with the deciding cells, INCOMPATIBLE with the reason) when its report's gate stopped it, else
each failed step with its error and the advice to re-execute it (night_failure). The sensor looks every
PROGRESS_INTERVAL_S, so each stage starts within seconds of the last one ending. Neither the schedule nor the sensor
plans from a rag_eval.yaml edited since the code location loaded it (defs/loaded_config.py).

With `alerts.on` holding `failed`, a failed or canceled nightly run posts one alert through run-status sensors
(running by default: a configured alert is meant to fire); a failed `rag-eval run` posts its own (cli/pipeline.py),
through the same failed_run_alert. A metrics run that failed because its verdict was worse is left to the verdict's
own alert when `alerts.on` holds that verdict, so a worse night gives one message, not two; a verdict it leaves out
(INCOMPATIBLE by default) is this alert's, so every night that does not end well posts one.
"""

import json
from collections.abc import Callable, Iterable

import dagster as dg
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph

from rag_eval_assets.alerts import failure_alert, send, send_once, verdict_alert, webhook_url
from rag_eval_assets.redaction import redact_text
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.reports.night_verdict import night_verdict
from rag_eval_assets.runs.baseline import verdict_of
from rag_eval_assets.runs.listing import run_eval_set_version, run_of_pipeline
from rag_eval_assets.runs.status import FAILED, read_status
from rag_eval_assets.runs.store import COMPARISON_JSON

from rag_eval_assets.defs.fingerprints import CORPUS_FILES, EVALSET_FILE
from rag_eval_assets.defs.jobs import INPUTS_JOB, JOBS, METRICS_JOB, commit_pipeline, inputs_job, pipeline_stages
from rag_eval_assets.defs.loaded_config import CONFIG_TAG, changed_since, config_sha256
from rag_eval_assets.defs.staleness import Planner, Step
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import CommitConflict
from rag_eval_assets.settings import Settings

NIGHT_TAG = "rag_eval/night"
NIGHTLY_CRON = "0 2 * * *"
PARTITION_TAG = "dagster/partition"
_FAILED = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
# How often the progress sensor looks: a tick whose night still runs ends at its first query, so a short interval
# costs little, and each stage starts within seconds of the last one ending (at 60 s a 14-question night took 6 min).
PROGRESS_INTERVAL_S = 5


def night_tags(night: str) -> dict[str, str]:
    return {NIGHT_TAG: night, PIPELINE_TAG: f"nightly-{night}"}


def _request(night: str, step: Step, asset_graph: BaseAssetGraph, settings: Settings) -> dg.RunRequest:
    # Every check of the selected assets, named: a launch that copies the request (the UI's "Launch all & commit
    # tick result", `rag-eval nightly`) sends the checks it names, and none when it names none.
    checks = sorted(asset_graph.get_check_keys_for_assets(set(step.assets)), key=lambda key: key.to_user_string())
    return dg.RunRequest(
        run_key=f"nightly-{night}-{step.job}" + (f"-{step.partition}" if step.partition else ""),
        job_name=step.job,
        partition_key=step.partition,
        asset_selection=list(step.assets),
        asset_check_keys=checks,
        # The file planned from: the run checks it still reads that one (defs/loaded_config.py).
        tags={**night_tags(night), CONFIG_TAG: config_sha256(settings.config_file)},
    )


def night_start(night: str, asset_graph: BaseAssetGraph, settings: Settings,
                instance: dg.DagsterInstance) -> dg.RunRequest:
    """The night's first run: the inputs that are missing or stale, else only the two fingerprints (cheap; they
    mark the night and record that the files did not change)."""
    steps = Planner(asset_graph, settings, instance).next_steps(pipeline_stages(settings)[:1])
    first = steps[0] if steps else Step(INPUTS_JOB, None, (dg.AssetKey(EVALSET_FILE), dg.AssetKey(CORPUS_FILES)))
    return _request(night, first, asset_graph, settings)


def latest_night(instance: dg.DagsterInstance) -> str | None:
    """The night the sensor follows: that of the newest inputs run with a night tag."""
    for run in instance.get_runs(filters=dg.RunsFilter(job_name=INPUTS_JOB), limit=50):
        if NIGHT_TAG in run.tags:
            return run.tags[NIGHT_TAG]
    return None


def nightly_requests(instance: dg.DagsterInstance, asset_graph: BaseAssetGraph, settings: Settings,
                     commit: Callable[[str], list[str]]):
    """The run requests the latest night needs next, once its runs so far have all finished and succeeded: the
    missing or stale asset partitions of the first stage that has any, leaving out the (job, partition) pairs the
    night already ran. When nothing is left, `commit(pipeline)` makes the night's tables current (nothing left to
    commit after the first time)."""
    night = latest_night(instance)
    if night is None:
        return dg.SkipReason("no nightly run yet")
    runs = instance.get_runs(filters=dg.RunsFilter(tags={NIGHT_TAG: night}))
    if any(not run.is_finished for run in runs):
        return dg.SkipReason(f"night {night}: waiting for its runs to finish")
    status = step_status(runs)
    if failed_steps(status):
        return dg.SkipReason(f"night {night}: {night_failure(settings, instance, runs)[0]}")
    planner = Planner(asset_graph, settings, instance, night_tags(night)[PIPELINE_TAG])
    steps = planner.next_steps(pipeline_stages(settings), done=set(status))
    if steps:
        return [_request(night, step, asset_graph, settings) for step in steps]
    try:
        committed = commit(night_tags(night)[PIPELINE_TAG])
    except CommitConflict as exc:  # its staging is kept: every later tick says the same until a new night
        return dg.SkipReason(f"{night_not_committed(night)}: {exc}")
    verdict = night_verdict(_night_run_dir(settings, runs))
    return dg.SkipReason(night_complete(night) + (f"; committed {len(committed)} tables" if committed else "")
                         + (f"; verdict: {verdict[0]}" if verdict else ""))


def _night_run_dir(settings: Settings, runs: list[dg.DagsterRun]):
    """The run directory of the night's newest metrics run (None when it wrote none)."""
    metrics = next((run for run in runs if run.job_name == METRICS_JOB and run.is_finished), None)
    return run_of_pipeline(settings.runs_dir, metrics.root_run_id or metrics.run_id) if metrics else None


def night_failure(settings: Settings, instance: dg.DagsterInstance, runs: list[dg.DagsterRun]) -> tuple[str, int]:
    """Why a night whose runs (newest first) have all finished, some failed or canceled, stopped, and its exit code:
    its verdict when the report ran and its gate failed on it (WORSE with the deciding cells, 1; INCOMPATIBLE with
    the reason, 2), else each failed step with its error and the advice to re-execute it (1)."""
    newest: dict[tuple[str, str | None], dg.DagsterRun] = {}
    for run in runs:
        newest.setdefault((run.job_name, run.tags.get(PARTITION_TAG)), run)
    failed = {key: run for key, run in newest.items() if run.status in _FAILED}
    if any(job == METRICS_JOB for job, _ in failed):
        verdict = night_verdict(_night_run_dir(settings, runs))
        if verdict is not None and verdict[1] != 0:
            return verdict
    stopped = [f"{job}{f'[{p}]' if p else ''} {_run_error(instance, run)}" for (job, p), run in sorted(
        failed.items(), key=lambda item: (item[0][0], item[0][1] or ""))]
    them = "it" if len(stopped) == 1 else "them"
    return f"{'; '.join(stopped)}; re-execute {them} in the UI and the sensor carries the night on", 1


def _run_error(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """'failed at step S: Error: message' (the error our code raised, not Dagster's wrapper), a failed check's
    description, or 'was canceled'."""
    if run.status == dg.DagsterRunStatus.CANCELED:
        return "was canceled"
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        check = entry.dagster_event.event_specific_data
        if not check.passed:  # a blocking check: its description says why, Dagster's error only names it
            return (f"failed its check {check.asset_key.to_user_string()}:{check.check_name}: "
                    f"{_one_line(check.description or 'no description')}")
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        error = entry.dagster_event.step_failure_data.error
        chain = [error]
        while chain[-1].cause is not None:
            chain.append(chain[-1].cause)
        error = next((e for e in chain if not e.cls_name.startswith("Dagster")), chain[-1])
        # Dagster's message starts with the class's dotted path; the lines after the first say which input.
        message = error.message.strip().split(f"{error.cls_name}: ", 1)[-1]
        return f"failed at step {entry.step_key}: {error.cls_name}: {_one_line(message)}"
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        error = getattr(entry.dagster_event.event_specific_data, "error", None)
        return f"failed: {_one_line(error.message if error is not None else entry.message)}"
    return "failed"


def _one_line(text: str) -> str:
    return redact_text(" ".join(line.strip() for line in text.strip().splitlines())[:400])


def night_complete(night: str) -> str:
    """How the sensor's tick says that `night` ran everything and its tables are committed (`rag-eval nightly
    --wait` reads it)."""
    return f"night {night} is complete"


def night_not_committed(night: str) -> str:
    """How the sensor's tick says that `night` ran everything but another pipeline committed meanwhile tables it
    did not recompute, so its own were not committed."""
    return f"night {night} ran but was not committed"


def step_status(runs: Iterable[dg.DagsterRun]) -> dict[tuple[str, str | None], dg.DagsterRunStatus]:
    """(job, partition) -> the status of its newest run, of `runs` listed newest first (a re-executed partition
    counts by its latest run)."""
    status: dict[tuple[str, str | None], dg.DagsterRunStatus] = {}
    for run in runs:
        status.setdefault((run.job_name, run.tags.get(PARTITION_TAG)), run.status)
    return status


def failed_steps(status: dict[tuple[str, str | None], dg.DagsterRunStatus]) -> list[str]:
    """`job[partition]` of each step whose newest run failed or was canceled."""
    return sorted(f"{job}[{p}]" if p else job for (job, p), state in status.items() if state in _FAILED)


def nightly_run_alert(settings: Settings, run: dg.DagsterRun, error: str | None) -> str:
    """The sensors' alert: only for a night's runs (`rag-eval run` sends its own, and needs no daemon)."""
    if NIGHT_TAG not in run.tags:
        return "not a nightly run: no alert"
    return failed_run_alert(settings, run, error)


def failed_run_alert(settings: Settings, run: dg.DagsterRun, error: str | None) -> str:
    """Send the alert of a failed or canceled run; what happened (for the sensor's log, the terminal and tests).
    The failed checks its run directory recorded say why better than Dagster's error, which only names them."""
    written = run_of_pipeline(settings.runs_dir, run.root_run_id or run.run_id)
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
        context.log.info(nightly_run_alert(settings, context.dagster_run, _first_error(context)))

    @dg.run_status_sensor(run_status=dg.DagsterRunStatus.CANCELED, name="nightly_cancel_alert",
                          default_status=dg.DefaultSensorStatus.RUNNING)
    def nightly_cancel_alert(context: dg.RunStatusSensorContext):
        """Posts an alert when a nightly run is canceled (alerts.on: failed)."""
        context.log.info(nightly_run_alert(settings, context.dagster_run, "canceled"))

    return [nightly_failure_alert, nightly_cancel_alert]


def automation_defs(settings: Settings) -> dg.Definitions:
    # What the file was when these definitions read it: a tick plans nothing from an edited file (loaded_config.py).
    loaded = config_sha256(settings.config_file)

    @dg.schedule(job=inputs_job, cron_schedule=NIGHTLY_CRON, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.STOPPED)
    def nightly_benchmark(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        """02:00 UTC: the inputs that are missing or stale (at least the file fingerprints); the sensor below takes
        the night from there."""
        changed = changed_since(settings.config_file, loaded)
        if changed is not None:
            return dg.SkipReason(changed)
        night = context.scheduled_execution_time.strftime("%Y-%m-%d")
        return night_start(night, context.repository_def.asset_graph, settings, context.instance)

    @dg.sensor(jobs=JOBS, minimum_interval_seconds=PROGRESS_INTERVAL_S, default_status=dg.DefaultSensorStatus.STOPPED)
    def nightly_progress(context: dg.SensorEvaluationContext):
        """Starts the latest night's next runs, of what is missing or stale, once its runs so far have succeeded;
        the report comes last, then the night's tables commit."""
        changed = changed_since(settings.config_file, loaded)
        if changed is not None:
            return dg.SkipReason(changed)
        return nightly_requests(context.instance, context.repository_def.asset_graph, settings,
                                lambda pipeline: commit_pipeline(settings, pipeline))

    return dg.Definitions(schedules=[nightly_benchmark], sensors=[nightly_progress, *alert_sensors(settings)])
