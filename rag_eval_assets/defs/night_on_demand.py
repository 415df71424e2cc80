"""A night now (`rag-eval nightly`), started as the 02:00 schedule starts one: its first run is night_start's request
(the night's tags and run key, the inputs that are missing or stale and every check on them) put in the instance's
run queue, where the daemon launches it through the code location's server like any queued run; the
nightly_progress sensor carries the night on to its report and commit. And a night followed to its end, from its
runs and the sensor's ticks.

The run is made as the scheduler makes its runs (dagster/_scheduler/scheduler.py, `_create_scheduler_run`): from
the code location's job subset of the request's assets and checks. The code location is loaded in this process
under the name the workspaces give it, so the daemon finds it in its own workspace when it dequeues the run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

import dagster as dg
from dagster._core.definitions.selector import JobSubsetSelector
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.remote_representation.code_location import CodeLocation
from dagster._core.remote_representation.external import RemoteRepository
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster._core.scheduler.instigation import InstigatorState, InstigatorType
from dagster._core.storage.tags import RUN_KEY_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext, WorkspaceRequestContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget

from rag_eval_assets.defs.automation import (
    NIGHT_TAG, failed_steps, latest_night, night_complete, night_failure, night_not_committed, night_start,
    step_status,
)
from rag_eval_assets.defs.loaded_config import CHANGED
from rag_eval_assets.settings import Settings

INPUT_ERROR = 2  # the exit code of a configuration that cannot be used as it is

# The code location's name in workspace.yaml, deploy/nightly/workspace.yaml and the code server unit.
LOCATION = "rag_eval_assets.definitions"
SENSOR = "nightly_progress"
# The daemon's threads that take a queued run and the sensor's ticks.
DAEMONS = ("QUEUED_RUN_COORDINATOR", "SENSOR")
POLL_S = 2.0


class CannotStart(Exception):
    """Why no night can start now (said to the operator as it is)."""


def on_demand_night(now: datetime) -> str:
    """The night's name: its UTC start to the second, never a scheduled night's date (their run keys would clash)."""
    return f"{now:%Y-%m-%dT%H%M%SZ}"


def start_night(instance: dg.DagsterInstance, settings: Settings, night: str) -> dg.DagsterRun:
    """Queue the first run of `night` for the daemon; the run (QUEUED). The code location is built from
    $RAG_EVAL_CONFIG, as the services build it: `settings` must be that file's."""
    if not isinstance(instance.run_coordinator, QueuedRunCoordinator):
        raise CannotStart(f"the instance in {instance.root_directory} has no run queue "
                          f"({type(instance.run_coordinator).__name__}): the daemon launches a night's runs from it; "
                          "use deploy/dagster.yaml or deploy/nightly/dagster.yaml")
    running = latest_night(instance)
    unfinished = [r for r in instance.get_runs(dg.RunsFilter(tags={NIGHT_TAG: running}))
                  if not r.is_finished] if running else []
    if unfinished:
        raise CannotStart(f"night {running} is still running ({len(unfinished)} runs not finished): the sensor "
                          "follows one night at a time; wait for it, or cancel its runs in the UI")
    sensor = sensor_state(instance)
    if sensor is None or not sensor.is_running:
        raise CannotStart(f"the {SENSOR} sensor is not running, so the night would stop after its first run: "
                          f"start it (dagster sensor start {SENSOR} -w <workspace.yaml>, or Automation in the UI)")
    with _code_location(instance) as (workspace, location, repository):
        request = night_start(night, repository.asset_graph, settings, instance)
        remote_job = location.get_job(JobSubsetSelector(
            location_name=location.name, repository_name=repository.name, job_name=request.job_name,
            op_selection=None, asset_selection=request.asset_selection,
            asset_check_selection=request.asset_check_keys,
        ))
        plan = location.get_execution_plan(remote_job, {}, step_keys_to_execute=None, known_state=None,
                                           instance=instance)
        run = instance.create_run(
            job_name=remote_job.name, run_id=None, run_config={}, status=dg.DagsterRunStatus.NOT_STARTED,
            resolved_op_selection=remote_job.resolved_op_selection, op_selection=None, step_keys_to_execute=None,
            root_run_id=None, parent_run_id=None,
            tags={**remote_job.run_tags, **request.tags, RUN_KEY_TAG: request.run_key},
            job_snapshot=remote_job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=remote_job.parent_job_snapshot, remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(), asset_selection=frozenset(request.asset_selection),
            asset_check_selection=frozenset(request.asset_check_keys), asset_graph=repository.asset_graph,
        )
        return instance.submit_run(run.run_id, workspace)


def daemons_down(instance: dg.DagsterInstance) -> list[str]:
    """The daemon threads a night needs that have sent no heartbeat lately (none: a daemon is running)."""
    return [name for name, status in instance.get_daemon_statuses(list(DAEMONS)).items()
            if status.required and not status.healthy]


def sensor_state(instance: dg.DagsterInstance) -> InstigatorState | None:
    """The stored state of the progress sensor of this code location (None: never started)."""
    return next((state for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
                 if state.name == SENSOR and state.repository_selector.location_name == LOCATION), None)


def follow_night(instance: dg.DagsterInstance, settings: Settings, night: str,
                 on_finished: Callable[[dg.DagsterRun], None]) -> tuple[str, int]:
    """Wait for `night` to end, calling `on_finished` once per run of it as it finishes; how it ended, in one line
    (the sensor's word once the night is complete, with its verdict), and the exit code `rag-eval nightly --wait`
    gives: 0 complete (BETTER, NO CHANGE, or no baseline), 1 WORSE or a step that failed, 2 INCOMPATIBLE or a
    configuration the sensor's code location did not load."""
    reported: set[str] = set()
    while True:
        runs = instance.get_runs(dg.RunsFilter(tags={NIGHT_TAG: night}))
        for run in reversed(runs):  # oldest first
            if run.is_finished and run.run_id not in reported:
                reported.add(run.run_id)
                on_finished(run)
        if failed_steps(step_status(runs)) and all(run.is_finished for run in runs):
            return night_failure(settings, instance, runs)
        newest = latest_night(instance)
        if newest != night:
            return f"night {newest} started since: the sensor follows that one now", 1
        sensor = sensor_state(instance)
        if sensor is None or not sensor.is_running:
            return f"the {SENSOR} sensor was stopped: nothing carries the night on", 1
        last = instance.get_ticks(sensor.instigator_origin_id, sensor.selector_id, limit=1)
        said = (last[0].skip_reason or "") if last else ""
        if all(run.is_finished for run in runs):
            if said.startswith(CHANGED):  # the sensor plans nothing more until the code location is reloaded
                return said, INPUT_ERROR
            if said.startswith(night_complete(night)):
                return said, 0
            if said.startswith(night_not_committed(night)):
                return said.removeprefix(f"night {night} "), 1
        time.sleep(POLL_S)


@contextmanager
def _code_location(instance: dg.DagsterInstance) -> Iterator[tuple[WorkspaceRequestContext, CodeLocation, RemoteRepository]]:
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, module_name=LOCATION), location_name=LOCATION)
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as process:
        workspace = process.create_request_context()
        location = workspace.get_code_location(LOCATION)
        (repository,) = location.get_repositories().values()
        yield workspace, location, repository
