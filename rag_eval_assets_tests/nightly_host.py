"""deploy/nightly's host for the tests: its instance on a throw-away PostgreSQL cluster and its code server as a
separate process (as the systemd units run them), the daemon's command to start beside it, and `dagster` commands
against its workspace."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from rag_eval_assets.defs.night_story import NIGHT_TAG
from rag_eval_assets_tests.dagster_server import free_port, stop_group
from rag_eval_assets_tests.postgres_cluster import postgres_cluster
from rag_eval_assets_tests.real_components import unavailable
from rag_eval_assets_tests.sample_config import REPO

BIN = Path(sys.executable).parent
DEPLOY = REPO / "deploy" / "nightly"
WORKSPACE = DEPLOY / "workspace.yaml"


@contextmanager
def service(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """`command` in its own process group (a unit's control group), output to `log`; the group is stopped on
    exit."""
    with log.open("ab") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield proc
    finally:
        stop_group(proc)


def dagster_cli(env: dict[str, str], *args: str, timeout: float = 120) -> None:
    """A `dagster` command against the workspace, retried while the code server is still loading the code."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run([str(BIN / "dagster"), *args, "-w", str(WORKSPACE)], cwd=REPO, env=env,
                              capture_output=True, text=True)
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stdout + done.stderr
        time.sleep(2)


def night_runs(instance: dg.DagsterInstance, night: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(tags={NIGHT_TAG: night})))


@contextmanager
def host_services(tmp_path: Path, monkeypatch, config: Path) -> Iterator[tuple[dg.DagsterInstance,
                                                                              subprocess.Popen, list[str],
                                                                              dict[str, str]]]:
    """deploy/nightly's instance on a throw-away cluster and its code server evaluating `config`, nothing started
    in it. Yields the instance, the code server, the daemon's command and the services' environment (also set in
    this process)."""
    if importlib.util.find_spec("dagster_postgres") is None:
        unavailable("the `nightly` extra (dagster-postgres) is not installed; `make install` installs it")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    with postgres_cluster() as cluster:
        env = {**os.environ, **cluster.env(), "DAGSTER_HOME": str(home), "RAG_EVAL_CONFIG": str(config),
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DAGSTER_CODE_SERVER_PORT": str(free_port())}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code_server = [str(BIN / "dagster"), "code-server", "start", "-m", "rag_eval_assets.definitions",
                       "-h", "127.0.0.1", "-p", env["DAGSTER_CODE_SERVER_PORT"], "--location-name",
                       "rag_eval_assets.definitions", "--log-level", "info"]
        daemon = [str(BIN / "dagster-daemon"), "run", "-w", str(WORKSPACE), "--log-level", "info"]
        with service(code_server, env, tmp_path / "code-server.log") as server, \
                dg.DagsterInstance.get() as instance:
            yield instance, server, daemon, env
