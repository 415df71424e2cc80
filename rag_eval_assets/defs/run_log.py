"""The log of a `rag-eval` pipeline run: every Dagster event of its runs (DEBUG up, with job, run id and step key)
and every log record of the process (INFO up), in one file that ends up in the run directory.

The terminal gets the warnings and errors of our code and the assets' own warnings (not the errors Dagster's engine
logs for the steps it skips after a failure: `rag-eval` says why the run failed); with --verbose, the whole log, line
for line: one handler writes each record to both, and to the terminal on a descriptor of its own
(`RunLog.stdout`/`stderr`). While a run executes in process, Dagster points descriptors 1 and 2 at its compute log
files and copies them back to the terminal with a `tail -F` process that it stops without waiting for the last lines
(dagster-io/dagster#23336): under load, lines written there during a run never reached the terminal.
Dagster's console logger stays quiet (jobs.QUIET_CONSOLE): it printed each failed step's stack trace twice (as the
step's failure and the run's), where `rag-eval` says why a run failed in one line and points at this file.

Every line is a logging record, so the redaction of rag_eval_assets.redaction (installed by the CLI) masks the
credentials of every URL in it before it is written anywhere.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

import dagster as dg

from rag_eval_assets.runs.save import RUN_ID_FORMAT

LOG_FILE = "rag-eval.log"  # in the run directory
# Not under rag_eval_assets: an instance may capture that logger into its event log (python_logs), which would hand
# these records back to the listener that made them.
EVENT_LOGGER = "rag_eval.dagster_events"
LINE = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
LOG_MESSAGE = "LOG"  # the kind of a run's log message, which has no Dagster event type


def _terse(record: logging.LogRecord) -> str:
    """One line per record on the terminal: the stack trace, if any, is in the log file."""
    return f"rag-eval: {record.levelname.lower()}: {record.getMessage()}"


def _for_the_terminal(record: logging.LogRecord) -> bool:
    """Without --verbose: the warnings and errors of our code and libraries, and an asset's own warnings (a log
    message of a run, with no event type). Not Dagster's events (`rag-eval` says itself why a run failed), nor the
    errors its engine logs for each step it skips after a failure ("Dependencies for step … Not executing")."""
    kind = getattr(record, "dagster_event", None)
    if kind is None:  # not from a run's event log
        return record.levelno >= logging.WARNING
    return kind == LOG_MESSAGE and record.levelno == logging.WARNING


class _Tee(logging.Handler):
    """Every record to the log file and, the whole of it with `verbose` (else warnings that are no Dagster event, in
    one line), to the terminal: one handler, so the two cannot disagree on which records they got."""

    def __init__(self, file: TextIO, terminal: TextIO, verbose: bool):
        super().__init__()
        self.file, self.terminal, self.verbose = file, terminal, verbose

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = LINE.format(record)
            self.file.write(line + "\n")
            self.file.flush()
            if self.verbose:
                self.terminal.write(line + "\n")
            elif _for_the_terminal(record):
                self.terminal.write(_terse(record) + "\n")
            self.terminal.flush()
        except Exception:
            self.handleError(record)


def _own_descriptor(stream: TextIO) -> TextIO:
    """`stream` on a duplicate of its file descriptor, taken before any run redirects that descriptor; `stream`
    itself where it has none (a test's capture, which no run redirects either)."""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return stream
    stream.flush()
    return open(os.dup(fd), "w", encoding=stream.encoding, errors=stream.errors or "backslashreplace", buffering=1)


class RunLog:
    """`with RunLog(runs_dir, verbose) as log:` collects the log in a hidden file under runs_dir; `log.listen(instance,
    run_id)` adds a run's Dagster events; `log.stdout` reaches the terminal while a run executes; `log.keep(run_dir,
    failed)` then moves the file where it belongs."""

    def __init__(self, runs_dir: Path, verbose: bool):
        self.runs_dir = runs_dir
        self.stamp = datetime.now(timezone.utc).strftime(RUN_ID_FORMAT)
        self.path = runs_dir / f".rag-eval-{self.stamp}-{os.getpid()}.log"
        self._events = logging.getLogger(EVENT_LOGGER)
        self._verbose = verbose
        self._root_level = logging.NOTSET
        self._heard: set[tuple] = set()

    def __enter__(self) -> RunLog:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        # What rag-eval says while a run executes goes to `stdout` (and the log's terminal lines to `stderr`): the
        # terminal's own descriptors, not the ones a run redirects.
        self.stdout, self.stderr = _own_descriptor(sys.stdout), _own_descriptor(sys.stderr)
        self._file = open(self.path, "a", encoding="utf-8")
        self._tee = _Tee(self._file, self.stderr, self._verbose)
        root = logging.getLogger()
        self._root_level = root.level
        root.setLevel(min(root.getEffectiveLevel(), logging.INFO))
        self._events.setLevel(logging.DEBUG)
        self._events.propagate = False
        root.addHandler(self._tee)
        self._events.addHandler(self._tee)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        root = logging.getLogger()
        root.removeHandler(self._tee)
        self._events.removeHandler(self._tee)
        self._tee.close()
        self._file.close()
        for own, stream in ((self.stdout, sys.stdout), (self.stderr, sys.stderr)):
            if own is not stream:
                own.close()
        root.setLevel(self._root_level)
        if exc_type is not None:  # rag-eval itself broke: its traceback follows, the log is kept beside the runs
            print(f"log: {self.keep(None, failed=True)}", file=sys.stderr)

    def listen(self, instance: dg.DagsterInstance, run_id: str) -> None:
        """Log each event of run `run_id` as the instance stores it."""
        instance.add_event_listener(run_id, self._event)

    def catch_up(self, instance: dg.DagsterInstance, run_id: str) -> None:
        """Log the events of run `run_id` that other processes stored (a cluster's workers execute its steps), which
        no listener of this process hears, once the run has ended."""
        for entry in instance.all_logs(run_id):
            if _identity(entry) not in self._heard:
                self._event(entry)

    def _event(self, entry: dg.EventLogEntry) -> None:
        self._heard.add(_identity(entry))
        kind = entry.dagster_event_type.value if entry.dagster_event_type else LOG_MESSAGE
        text = f"{entry.job_name} {entry.run_id} {entry.step_key or '-'} {kind} - {entry.message}"
        error = _error(entry)
        if error is not None:
            text += "\n" + error.to_string().rstrip()
        level = entry.level if isinstance(entry.level, int) else logging.getLevelName(entry.level)
        self._events.log(level, text, extra={"dagster_event": kind})

    def note(self, lines: list[str]) -> None:
        """Add `lines` to the log once it is closed (why the pipeline failed, said after its runs)."""
        if lines:
            with open(self.path, "a", encoding="utf-8") as file:
                file.writelines(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} ERROR rag_eval: {line}\n"
                                for line in lines)

    def keep(self, run_dir: Path | None, failed: bool) -> Path:
        """The log's place: `run_dir`/rag-eval.log, else beside the runs as failed-<time>.log (or rag-eval-<time>.log
        when nothing failed but no run directory was written)."""
        if run_dir is not None:
            target = run_dir / LOG_FILE
        else:
            name = f"{'failed' if failed else 'rag-eval'}-{self.stamp}"
            target = self.runs_dir / f"{name}.log"
            if target.exists():
                target = self.runs_dir / f"{name}-{os.getpid()}.log"
        self.path.replace(target)
        self.path = target
        return target


def _identity(entry: dg.EventLogEntry) -> tuple:
    return entry.run_id, entry.timestamp, entry.step_key, entry.message


def _error(entry: dg.EventLogEntry):
    """The error a failure event carries (a step's, a run's, an engine event's), else None."""
    if entry.error_info is not None:
        return entry.error_info
    data = entry.dagster_event.event_specific_data if entry.dagster_event else None
    return getattr(data, "error", None)
