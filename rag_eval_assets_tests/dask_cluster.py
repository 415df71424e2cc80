"""A real dask.distributed cluster for the tests, started from the command line as docs/deployment.md shows it: `dask
scheduler` and one `dask worker` per name on loopback, each in its own process group (stopped by its pid only), and
which worker ran which step, read from the scheduler's task stream."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from distributed import Client

from rag_eval_assets_tests.dagster_server import BIN, free_port, stop_group
from rag_eval_assets_tests.waiting import wait_for


@dataclass
class DaskCluster:
    address: str
    client: Client  # the test's own client: the scheduler's state and its task stream
    workers: dict[str, subprocess.Popen]  # by worker name; each the leader of its own process group

    def worker_names(self) -> dict[str, str]:
        """Worker address -> name, of the workers connected now."""
        return {address: info["name"] for address, info in self.client.scheduler_info(n_workers=-1)["workers"].items()}


def scheduler_command(port: int) -> list[str]:
    return [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]


def worker_command(address: str, name: str) -> list[str]:
    return [str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1", "--name", name,
            "--host", "127.0.0.1", "--no-dashboard"]


def _started(command: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=log.parent, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


@contextmanager
def dask_cluster(directory: Path, env: Mapping[str, str],
                 names: tuple[str, ...] = ("w1", "w2")) -> Iterator[DaskCluster]:
    """A scheduler on a free loopback port and one single-threaded worker per name (environment `env`: the workers
    rebuild Dagster jobs, so it names the configuration and the Dagster home); their logs in `directory`. Yields once
    every worker has registered with the scheduler."""
    directory.mkdir(parents=True, exist_ok=True)
    address = f"tcp://127.0.0.1:{free_port()}"
    with ExitStack() as stack:
        scheduler = _started(scheduler_command(int(address.rsplit(":", 1)[1])), env, directory / "scheduler.log")
        stack.callback(stop_group, scheduler)
        workers = {}
        for name in names:
            workers[name] = _started(worker_command(address, name), env, directory / f"{name}.log")
            stack.callback(stop_group, workers[name])
        client = stack.enter_context(_client(address, directory, scheduler))
        cluster = DaskCluster(address, client, workers)
        wait_for(lambda: set(cluster.worker_names().values()) == set(names), "the workers to register", directory,
                 running=[scheduler, *workers.values()])
        # The scheduler records which worker ran each task from here on (its task stream, off until asked for).
        client.get_task_stream()
        yield cluster


@contextmanager
def _client(address: str, directory: Path, scheduler: subprocess.Popen) -> Iterator[Client]:
    def connected() -> Client | None:
        try:
            return Client(address, timeout=2)
        except OSError:  # not listening yet
            return None

    client = wait_for(connected, "the scheduler to listen", directory, running=[scheduler])
    try:
        yield client
    finally:
        client.close()


def steps_by_worker(cluster: DaskCluster, names: Mapping[str, str]) -> dict[str, list[tuple[str, str, str]]]:
    """Worker name -> (job, step, run id) of every step task that finished there, from the scheduler's task stream
    (tasks are keyed `<job>.<step>.<run id>`, defs/executors.py). `names`: worker address -> name."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for record in cluster.client.get_task_stream():
        if record.get("status") != "OK":
            continue
        head, run_id = record["key"].rsplit(".", 1)
        job, step = head.split(".", 1)
        found.setdefault(names[record["worker"]], []).append((job, step, run_id))
    return found
