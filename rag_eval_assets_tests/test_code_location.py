"""The code location loads in the real tools: the `dg` CLI and the Dagster webserver (`make ui`)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXPECTED_ASSETS = {
    "evalset",
    "dev_subset",
    "corpus_documents",
    "chunks",
    "gold_labels",
    "bm25_index",
    "dense_index",
    "retrieval_results",
    "retrieval_metrics_per_query",
    "retrieval_metrics",
    "answers",
    "judged_answers",
    "generated_queries",
    "answer_metrics_per_query",
    "answer_metrics",
    "evaluation_run",
    "run_comparison",
}


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "DAGSTER_HOME": str(home), "RAG_EVAL_CONFIG": str(REPO / "rag_eval.yaml")}


def test_dg_cli_lists_the_assets(tmp_path):
    out = subprocess.run(
        [str(BIN / "dg"), "list", "defs", "--json"], cwd=REPO, env=_env(tmp_path), capture_output=True, text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert {a["asset_key"] for a in listed["assets"]} == EXPECTED_ASSETS
    assert {c["key"] for c in listed["asset_checks"]} == {
        "chunks:chunks_schema",
        "evalset:frozen_version_unchanged",
        "run_comparison:invariants_match",
        "run_comparison:quality_gate",
    }
    assert {j["name"] for j in listed["jobs"]} >= {"inputs_job", "retrieval_grid_job", "answer_grid_job", "metrics_job"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def webserver(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, so teardown stops the server and its code server
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, "dagster-webserver exited"
            time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_webserver_serves_the_asset_graph(webserver):
    query = "{ assetNodes { assetKey { path } dependencyKeys { path } groupName } }"
    deadline = time.monotonic() + 120
    while True:  # the code location may still be loading when the server first answers
        reply = httpx.post(f"{webserver}/graphql", json={"query": query}, timeout=30).json()
        nodes = (reply.get("data") or {}).get("assetNodes") or []
        if nodes or time.monotonic() > deadline:
            break
        time.sleep(2)
    by_key = {n["assetKey"]["path"][0]: n for n in nodes}
    assert set(by_key) == EXPECTED_ASSETS
    deps = {key: {d["path"][0] for d in node["dependencyKeys"]} for key, node in by_key.items()}
    assert deps["chunks"] == {"corpus_documents"}
    assert deps["gold_labels"] == {"evalset", "corpus_documents", "chunks"}
    assert deps["retrieval_results"] == {"evalset", "chunks", "bm25_index", "dense_index"}
    assert deps["answers"] == {"evalset", "chunks", "retrieval_results"}
    assert deps["judged_answers"] == {"evalset", "answers"}
    assert by_key["evalset"]["groupName"] == "inputs"
