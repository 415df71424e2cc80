"""A real Dagster server (`dagster-webserver` or `dagster dev`) on loopback for the tests, and its GraphQL API."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dagster_env(home: Path, config: Path) -> dict[str, str]:
    """The environment of a server with its own instance in `home` that evaluates what `config` says."""
    home.mkdir(parents=True, exist_ok=True)
    # Dagster's defaults otherwise, but no "Join the Dagster community" dialog: with nux on, the UI opens it over
    # whatever page a browser test is on, whenever it gets to it (a loaded machine: after the first page).
    instance_settings = home / "dagster.yaml"
    if not instance_settings.exists():
        instance_settings.write_text("nux:\n  enabled: false\ntelemetry:\n  enabled: false\n", encoding="utf-8")
    return {**os.environ, "DAGSTER_HOME": str(home), "RAG_EVAL_CONFIG": str(config), "HF_HUB_OFFLINE": "1"}


@contextmanager
def running_server(command: list[str], env: dict[str, str], log: Path) -> Iterator[str]:
    """Run `command` (which gets `-h 127.0.0.1 -p <port>` appended) from the repo root until /server_info answers;
    yield its base URL. The server's output goes to `log`, whose tail is shown when it fails to start."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "-h", "127.0.0.1", "-p", str(port)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            # Its own process group: teardown stops the server and every process it started (code server, daemon,
            # run workers) and nothing else.
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start:\n{_tail(log)}")
            time.sleep(0.5)
        yield url
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL to whatever of it is left after STOP_TIMEOUT."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while not _group_gone(proc):
        if time.monotonic() > deadline:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT)
            return
        time.sleep(0.2)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_gone(proc: subprocess.Popen) -> bool:
    # The leader is our child: reap it first, or its zombie keeps the group alive.
    proc.poll()
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return True
    return False


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    reply = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=30).json()
    assert not reply.get("errors"), reply["errors"]
    return reply["data"]


def wait_for_asset_keys(url: str, timeout: float = START_TIMEOUT) -> set[str]:
    """The asset keys of the code location, once it has loaded (the server answers before it has)."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = graphql(url, "{ assetNodes { assetKey { path } } }")["assetNodes"]
        if nodes or time.monotonic() > deadline:
            return {"/".join(n["assetKey"]["path"]) for n in nodes}
        time.sleep(1)
