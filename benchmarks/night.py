"""Night benchmark: a night on the shipped sample (`rag-eval nightly --wait` under `dagster dev`, the daemon
launching the night's run from the queue) against `rag-eval run` on the same configuration, each on a fresh store
and Dagster home, one after the other, repeated `--repeats` times alternating. Issue 30 asks that a night take at
most twice `rag-eval run`'s time.

Timed from the command's start to its exit, as an operator waits for them: the night includes queueing its run
(`rag-eval nightly` loads the code location in its own process to make it), the daemon's dequeue and the run
worker's start. `dagster dev` is started (and its code location loaded) before the clock starts, as a host's
services are up before 02:00.

    PYTHONPATH=. .venv/bin/python benchmarks/night.py [--repeats N] [--out FILE.json]

Everything is written under a temporary directory; nothing in the repository changes. Exit status 1 when a night or
a run did not succeed.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import json
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from rag_eval_assets.retrieval.backend_choice import cpu_model

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET = 2.0
LOADED = "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"


def _fresh(directory: Path) -> dict[str, str]:
    """A store and Dagster home of their own under `directory`; the environment that uses them."""
    (directory / "home").mkdir(parents=True)
    shutil.copy(REPO / "deploy" / "dagster.yaml", directory / "home")
    config = (REPO / "rag_eval.yaml").read_text(encoding="utf-8")
    config = config.replace("storage_dir: data", f"storage_dir: {directory / 'store'}", 1)
    (directory / "rag_eval.yaml").write_text(config.replace("path: data/sample", f"path: {REPO / 'data/sample'}"),
                                             encoding="utf-8")
    return {**os.environ, "DAGSTER_HOME": str(directory / "home"), "RAG_EVAL_CONFIG": str(directory / "rag_eval.yaml"),
            "PYTHONPATH": str(REPO)}


def _timed(command: list[str], env: dict[str, str], log: Path) -> float:
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[1:])} exited {done.returncode}: see {log}")
    return seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(directory: Path) -> float:
    env = _fresh(directory)
    return _timed([str(BIN / "rag-eval"), "--config", env["RAG_EVAL_CONFIG"], "run"], env, directory / "run.log")


def night_once(directory: Path) -> float:
    env = _fresh(directory)
    port = _free_port()
    with (directory / "dagster.log").open("w") as log:
        dev = subprocess.Popen([str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p",
                                str(port)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:  # the code location loaded, as on a host whose services are up
            try:
                entries = httpx.post(f"http://127.0.0.1:{port}/graphql", json={"query": LOADED}, timeout=5).json()
                entries = entries["data"]["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    break
            except (httpx.HTTPError, KeyError, TypeError):
                pass
            if time.monotonic() > deadline or dev.poll() is not None:
                sys.exit(f"dagster dev did not load the code location: see {directory / 'dagster.log'}")
            time.sleep(0.5)
        return _timed([str(BIN / "rag-eval"), "--config", env["RAG_EVAL_CONFIG"], "nightly", "--wait"], env,
                      directory / "night.log")
    finally:
        os.killpg(dev.pid, signal.SIGTERM)
        dev.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs, nights, loads = [], [], [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="night-bench-") as tmp:
        # A first run warms the page cache (the model files, the sample) for both sides alike.
        run_once(Path(tmp) / "warm")
        for i in range(args.repeats):
            runs.append(run_once(Path(tmp) / f"run{i}"))
            nights.append(night_once(Path(tmp) / f"night{i}"))
            loads.append(os.getloadavg()[0])
    run, night = statistics.median(runs), statistics.median(nights)
    result = {"cpu": cpu_model(), "cpus": os.cpu_count(), "load_average_1min": loads, "rag_eval_run_s": runs,
              "night_s": nights, "ratio": night / run}
    print(f"CPU: {result['cpu']} ({result['cpus']} cores); load average (1 min) {min(loads):.1f}-{max(loads):.1f}")
    print(f"rag-eval run: {', '.join(f'{s:.1f}' for s in runs)} s (median {run:.1f} s)")
    print(f"a night:      {', '.join(f'{s:.1f}' for s in nights)} s (median {night:.1f} s)")
    met = "met" if night / run <= TARGET else "NOT met"
    print(f"night / run: {night / run:.2f}x (target: at most {TARGET:.0f}x: {met})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
