"""A night now (`rag-eval nightly`), started as the 02:00 schedule starts one: its run is the schedule's request
(night_request: the night's tags and run key) put in the instance's run queue, where the daemon launches it through
the code location's server like any queued run. And a night followed to its end, from its run and the runs it
executes.

The run is made as the scheduler makes its runs (dagster/_scheduler/scheduler.py, `_create_scheduler_run`): from
the code location's job. The code location is loaded in this process
under the name the workspaces give it, so the daemon finds it in its own workspace when it dequeues the run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg
from dagster._core.definitions.selector import JobSubsetSelector
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.remote_representation.code_location import CodeLocation
from dagster._core.remote_representation.external import RemoteRepository
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES
from dagster._core.storage.tags import RUN_KEY_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext, WorkspaceRequestContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget

from rag_eval_assets.defs.automation import night_request
from rag_eval_assets.defs.night_story import (
    NIGHT_TAG, NIGHTLY_JOB, night_failure, pipeline_runs,
)
from rag_eval_assets.settings import Settings

# The code location's name in workspace.yaml, deploy/nightly/workspace.yaml and the code server unit.
LOCATION = "rag_eval_assets.definitions"
# The daemon's thread that takes a queued run.
DAEMONS = ("QUEUED_RUN_COORDINATOR",)
POLL_S = 0.5


class CannotStart(Exception):
    """Why no night can start now (said to the operator as it is)."""


def start_night(instance: dg.DagsterInstance, settings: Settings, night: str) -> dg.DagsterRun:
    """Queue the run of `night` for the daemon; the run (QUEUED). The code location is built from
    $RAG_EVAL_CONFIG, as the services build it: `settings` must be that file's."""
    if not isinstance(instance.run_coordinator, QueuedRunCoordinator):
        raise CannotStart(f"the instance in {instance.root_directory} has no run queue "
                          f"({type(instance.run_coordinator).__name__}): the daemon launches a night's run from it; "
                          "use deploy/dagster.yaml or deploy/nightly/dagster.yaml")
    unfinished = instance.get_runs(dg.RunsFilter(job_name=NIGHTLY_JOB, statuses=NOT_FINISHED_STATUSES), limit=1)
    if unfinished:
        raise CannotStart(f"night {unfinished[0].tags.get(NIGHT_TAG)} is still running (run {unfinished[0].run_id}): "
                          "one night at a time; wait for it, or cancel its run in the UI")
    with _code_location(instance) as (workspace, location, repository):
        request = night_request(night, settings)
        remote_job = location.get_job(JobSubsetSelector(
            location_name=location.name, repository_name=repository.name, job_name=request.job_name,
            op_selection=None))
        plan = location.get_execution_plan(remote_job, {}, step_keys_to_execute=None, known_state=None,
                                           instance=instance)
        run = instance.create_run(
            job_name=remote_job.name, run_id=None, run_config={}, status=dg.DagsterRunStatus.NOT_STARTED,
            resolved_op_selection=remote_job.resolved_op_selection, op_selection=None, step_keys_to_execute=None,
            root_run_id=None, parent_run_id=None,
            tags={**remote_job.run_tags, **request.tags, RUN_KEY_TAG: request.run_key},
            job_snapshot=remote_job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=remote_job.parent_job_snapshot, remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(), asset_selection=None, asset_check_selection=None,
            asset_graph=repository.asset_graph,
        )
        return instance.submit_run(run.run_id, workspace)


def daemons_down(instance: dg.DagsterInstance) -> list[str]:
    """The daemon threads a night needs that have sent no heartbeat lately (none: a daemon is running)."""
    return [name for name, status in instance.get_daemon_statuses(list(DAEMONS)).items()
            if status.required and not status.healthy]


def follow_night(instance: dg.DagsterInstance, settings: Settings, night: str,
                 on_finished: Callable[[dg.DagsterRun], None]) -> tuple[str, int]:
    """Wait for `night`'s run (its newest: a re-execution's) to end, calling `on_finished` once per run of its
    pipeline as it finishes; how it ended, in one line, and the exit code `rag-eval nightly --wait` gives: 0
    complete (BETTER, NO CHANGE, or no baseline), 1 WORSE or a run that failed, 2 INCOMPATIBLE or a configuration
    the code location did not load."""
    reported: set[str] = set()
    while True:
        night_run = next(iter(instance.get_runs(dg.RunsFilter(job_name=NIGHTLY_JOB, tags={NIGHT_TAG: night}),
                                                limit=1)), None)
        if night_run is None:
            return f"night {night} has no run", 1
        runs = pipeline_runs(instance, night_run)
        for run in reversed(runs):  # oldest first
            if run.is_finished and run.run_id not in reported:
                reported.add(run.run_id)
                on_finished(run)
        if night_run.is_finished:
            return night_failure(settings, instance, night_run) if not night_run.is_success else \
                (f"night {night} is complete", 0)
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
