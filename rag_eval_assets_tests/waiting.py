"""Waits that follow events: a condition coming true, a process ending. Their only clock guards against a hang and
measures idleness, not slowness: a wait fails after `idle_s` seconds in which no file under `watch` changed (every
event, log line and table a run writes lands there), so a loaded machine slows a test down but never fails it."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import httpx

T = TypeVar("T")
# No file written for this long: the run hangs. Below the 5 minutes after which Dagster logs again that a step is
# still blocked by a pool, so a run stuck waiting for a slot is not taken for one making progress.
IDLE_S = 240.0


def _state(watch: Path) -> frozenset[tuple[str, int, int]]:
    found = set()
    for folder, _, files in os.walk(watch):
        for name in files:
            try:
                stat = os.stat(os.path.join(folder, name))
            except FileNotFoundError:  # removed between the listing and the stat
                continue
            found.add((os.path.join(folder, name), stat.st_size, stat.st_mtime_ns))
    return frozenset(found)


def wait_for(condition: Callable[[], T], what: str, watch: Path, *, running: Sequence[subprocess.Popen] = (),
             idle_s: float = IDLE_S) -> T:
    """The first true value of `condition()`. Fails at once when a process of `running` ends first (the condition
    will never come), and after `idle_s` seconds without a change under `watch`."""
    seen, since = _state(watch), time.monotonic()
    while not (value := condition()):
        for process in running:
            if process.poll() is not None:
                raise AssertionError(f"waiting for {what}: {process.args} ended first (exit {process.returncode})")
        now = _state(watch)
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since > idle_s:
            raise AssertionError(f"waiting for {what}: nothing under {watch} changed for {idle_s:.0f} s")
        time.sleep(0.5)
    return value


def run_to_end(command: Sequence[str], *, cwd: Path, env: Mapping[str, str], watch: Path | None = None,
               idle_s: float = IDLE_S) -> subprocess.CompletedProcess:
    """`command` run to its end, its stdout and stderr through files in `cwd` (watched, with `watch`, for progress;
    default `cwd`)."""
    stamp = time.monotonic_ns()
    stdout, stderr = (cwd / f".{stamp}.{name}" for name in ("stdout", "stderr"))
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(command, cwd=cwd, env=dict(env), stdout=out, stderr=err)
        try:
            wait_for(lambda: process.poll() is not None, f"{command} to end", watch or cwd, idle_s=idle_s)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    texts = [path.read_text(encoding="utf-8") for path in (stdout, stderr)]
    stdout.unlink()
    stderr.unlink()
    return subprocess.CompletedProcess(list(command), process.returncode, *texts)


def wait_until_answers(server: subprocess.Popen, url: str, name: str, log, timeout_s: float) -> None:
    """Until GET `url` answers 200 from the server process we started: fails at once with its log's tail when the
    process ends first, and after `timeout_s` (a start that never answers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"{name} exited with {server.returncode}:\n{log_tail(log)}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer within {timeout_s:.0f} s:\n{log_tail(log)}")
        time.sleep(0.25)


def log_tail(log, chars: int = 3000) -> str:
    """The end of a server's log file (opened binary, read from the start)."""
    log.seek(0)
    return log.read().decode("utf-8", errors="replace")[-chars:]
