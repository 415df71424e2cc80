"""The pipeline run from the command line: the Dagster home and instance, the jobs run through them (what they say
on the terminal is defs/run_events.py's), the outcome and where to look, and asset values read back."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rag_eval_assets.settings import Settings

INPUT_ERROR = 2  # exit code of a bad input file or setting (named by file, line and field, or by dotted key)
# The instance settings rag-eval writes into a Dagster home that has no dagster.yaml (as `make` does).
INSTANCE_SETTINGS = Path(__file__).resolve().parents[2] / "deploy" / "dagster.yaml"
FAILURE_LINE = 200  # characters of the reason on the line that says a run failed; every reason whole follows it

T = TypeVar("T")


def dagster_home(config_file: Path) -> None:
    """DAGSTER_HOME, or where it is unset (outside make) the .dagster_home beside the configuration file, as make
    sets it beside the configuration it runs; either way created if missing, with the project's instance settings
    when it has no dagster.yaml of its own."""
    given = os.environ.get("DAGSTER_HOME")
    home = Path(given) if given else config_file.parent / ".dagster_home"
    if not given:
        os.environ["DAGSTER_HOME"] = str(home)  # for Dagster and the processes we start (backfill)
        print(f"rag-eval: DAGSTER_HOME is not set: using {home}", file=sys.stderr)
    if _with_instance_settings(home) and given:
        print(f"rag-eval: {home} had no dagster.yaml: wrote the project's instance settings ({INSTANCE_SETTINGS})",
              file=sys.stderr)


def _with_instance_settings(home: Path) -> bool:
    """Give Dagster home `home` the project's instance settings (telemetry and the UI's community dialog off, the
    run queue, the llm pool, run monitoring) unless it has a dagster.yaml of its own; whether they were written.
    Without one Dagster would use its own defaults: a telemetry banner and dialogs in the UI."""
    home.mkdir(parents=True, exist_ok=True)
    if (home / "dagster.yaml").is_file():
        return False
    shutil.copyfile(INSTANCE_SETTINGS, home / "dagster.yaml")
    return True


@contextmanager
def _pipeline_instance(config_file: Path, instance_dir: Path | None):
    """The instance runs go to: DAGSTER_HOME's, or one of its own in `instance_dir` (evaluate's and benchmark's
    output folder), with the project's instance settings, so that a re-run into the same folder runs only what is
    missing or stale."""
    import dagster as dg

    if instance_dir is None:
        dagster_home(config_file)
        with dg.DagsterInstance.get() as instance:
            yield instance
        return
    _with_instance_settings(instance_dir)
    with dg.DagsterInstance.from_config(str(instance_dir)) as instance:
        yield instance


@dataclass(frozen=True)
class Outcome:
    ok: bool
    input_error: bool
    run_dir: Path | None  # the run directory this pipeline wrote, if it got that far
    log_file: Path
    errors: tuple[str, ...] = ()  # why it failed: the failed checks (name and description) and step errors
    listing: tuple[str, ...] = ()  # each asset's state (defs/run_events.py)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else INPUT_ERROR if self.input_error else 1

    def failure_line(self) -> str:
        """What a failed pipeline says first: that it failed, and why, in one line: the first reason (a check's name
        and description, or a step's error), cut after its first parts past FAILURE_LINE characters."""
        if not self.errors:
            return f"run failed (exit {self.exit_code}): see the log {self.log_file}"
        parts = _one_line(self.errors[0]).split("; ")
        shown = parts[0]
        for part in parts[1:]:
            if len(shown) >= FAILURE_LINE:
                shown += "; …"
                break
            shown += f"; {part}"
        more = f" (and {len(self.errors) - 1} more reasons below)" if len(self.errors) > 1 else ""
        return f"run failed (exit {self.exit_code}): {shown}{more}"

    def story(self) -> list[str]:
        """What `rag-eval` prints on stdout once the pipeline ended: when it failed, the failure line first, then
        every reason whole where that line could not hold them; then each asset's state."""
        if self.ok:
            return list(self.listing)
        first = self.failure_line()
        whole = [] if len(self.errors) == 1 and first.endswith(_one_line(self.errors[0])) else list(self.errors)
        return [first, *whole, *self.listing]

    def where(self) -> str:
        """Where to look: the run directory and its report when written, and the log."""
        from rag_eval_assets.reports.html import REPORT_FILE

        lines = [f"run directory: {self.run_dir}", f"report: {self.run_dir / REPORT_FILE}"] if self.run_dir else []
        return "\n".join([*lines, f"log: {self.log_file}"])


def run_and_read(
    config: str | Path | None,
    instance_dir: Path | None,
    verbose: bool,
    force: bool = False,
    read: Callable[[Settings, Callable], T] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Outcome, Settings, T | None]:
    """The pipeline of configuration file `config` (None: the default one) into the instance of `instance_dir`
    (None: DAGSTER_HOME's), for what is missing or stale (everything with `force`); then, when it succeeded,
    `read(settings, load)` with `load(asset, partition_key=None)` reading an asset's value. Returns the outcome, the
    settings and what `read` returned (None when the pipeline failed or there is no `read`). `overrides` lay
    values over the file's (load_settings), for this run only."""
    from rag_eval_assets.defs.infrastructure import check_infrastructure
    from rag_eval_assets.settings import load_settings

    settings = load_settings(config, overrides)
    # The cluster and the store answer, whether or not anything is stale; before Dagster's import, seconds of it.
    check_infrastructure(settings)
    from rag_eval_assets.definitions import build_defs
    defs = build_defs(settings.config_file, overrides)
    with _pipeline_instance(settings.config_file, instance_dir) as instance:
        outcome = _pipeline(defs, settings, instance, verbose, force)
        if not outcome.ok or read is None:
            return outcome, settings, None
        with _asset_values(defs, instance) as load:
            return outcome, settings, read(settings, load)


def _pipeline(defs, settings, instance, verbose: bool, force: bool) -> Outcome:
    """The jobs of the pipeline, their log in a file (and on the terminal with `verbose`); on stdout, when it failed,
    why (its first line, then every reason whole), then each asset's state; never a stack trace. With nothing to do,
    the run directory is the current one's."""
    from rag_eval_assets.definitions import cluster_runs
    from rag_eval_assets.defs.run_events import execute_pipeline
    from rag_eval_assets.defs.run_log import RunLog
    from rag_eval_assets.runs.listing import list_runs

    before = set(list_runs(settings.runs_dir))
    log = RunLog(settings.runs_dir, verbose)
    on_cluster = cluster_runs(settings.config_file, instance) if settings.execution.dask is not None else None
    executed = execute_pipeline(defs, settings, instance, log, force, on_cluster)
    ok = executed.failed_run is None
    written = [path for path in list_runs(settings.runs_dir) if path not in before]
    if not ok and settings.alerts is not None and "failed" in settings.alerts.on:
        _alert_failure(settings, instance, executed.failed_run, executed.errors)
    log.note([f"run failed: {error}" for error in executed.errors])  # the log says why, as the terminal did
    # The log goes into the run directory this pipeline wrote, never into an earlier one it points at.
    log_file = log.keep(written[0] if written else None, failed=not ok)
    run_dir = written[0] if written else _current_run_dir(defs, instance) if ok else None
    outcome = Outcome(ok, executed.input_error, run_dir, log_file, tuple(executed.errors), tuple(executed.listing))
    print("\n".join(outcome.story()))
    return outcome


def _one_line(reason: str) -> str:
    """A reason of several lines (an input error's list of problems) on one."""
    return " ".join(line.strip() for line in reason.splitlines() if line.strip())


def _alert_failure(settings, instance, run_id: str, errors: list[str]) -> None:
    """The failed run's alert (alerts.on: failed), as the alert sensors send it for a failed night: the sensors
    watch only nights' runs, and no daemon need be running for this one."""
    from rag_eval_assets.defs.automation import failed_run_alert
    from rag_eval_assets.runs.listing import run_of_pipeline

    run = instance.get_run_by_id(run_id)
    written = run_of_pipeline(settings.runs_dir, run.root_run_id or run.run_id)
    what = failed_run_alert(settings, run, errors[0] if errors else None, written)
    print(f"rag-eval: failure alert: {what}", file=sys.stderr)


def _current_run_dir(defs, instance) -> Path | None:
    """The run directory of the evaluation_run readers see now (None before the first)."""
    with _asset_values(defs, instance) as load:
        try:
            return Path(load("evaluation_run")["run_dir"].iloc[0])
        except FileNotFoundError:
            return None


@contextmanager
def _asset_values(defs, instance):
    """`load(asset, partition_key=None)`: an asset's value through its IO manager, as the assets read each other,
    wherever storage_dir is (a directory or an object store). Dagster's loader prints a DEBUG line per file it opens
    to stderr, through a console logger it builds for each load and takes no configuration for; logging's switch
    is process-wide, so DEBUG is off while it reads."""
    with defs.get_asset_value_loader(instance=instance) as loader:
        previous = logging.root.manager.disable
        logging.disable(logging.DEBUG)
        try:
            yield loader.load_asset_value
        finally:
            logging.disable(previous)
