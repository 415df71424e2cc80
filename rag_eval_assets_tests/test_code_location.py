"""The code location loads in the real tools: the `dg` CLI and the Dagster webserver (`make ui`)."""

import json
import subprocess
from pathlib import Path

import pytest

from rag_eval_assets_tests.dagster_server import BIN, REPO, dagster_env, graphql, running_server, wait_for_asset_keys

EXPECTED_ASSETS = {
    "evalset_file",
    "corpus_files",
    "retriever_config",
    "evalset",
    "dev_subset",
    "corpus_documents",
    "chunks",
    "gold_labels",
    "bm25_index",
    "dense_index/all-MiniLM-L6-v2__torch",
    "preflight",
    "retrieval_results",
    "retrieval_metrics_per_query",
    "retrieval_metrics",
    "answers",
    "judged_answers",
    "generated_queries",
    "answer_metrics_per_query",
    "answer_metrics",
    "grades_file",
    "evaluation_run",
    "run_comparison",
}


def _env(tmp_path: Path) -> dict[str, str]:
    return dagster_env(tmp_path / "dagster_home", REPO / "rag_eval.yaml")


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
        "gold_labels:gold_resolves",
        "run_comparison:invariants_match",
        "run_comparison:quality_gate",
        "answer_metrics_per_query:json_v2_dev_gate",
        "evaluation_run:call_health",
    }
    assert {j["name"] for j in listed["jobs"]} >= {"inputs_job", "retrieval_grid_job", "answer_grid_job", "metrics_job"}


@pytest.fixture
def webserver(tmp_path):
    with running_server([str(BIN / "dagster-webserver"), "-w", "workspace.yaml"], _env(tmp_path),
                        tmp_path / "webserver.log") as url:
        yield url


def test_webserver_serves_the_asset_graph(webserver):
    wait_for_asset_keys(webserver)  # the code location may still be loading when the server first answers
    nodes = graphql(webserver, "{ assetNodes { assetKey { path } dependencyKeys { path } groupName } }")["assetNodes"]
    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    assert set(by_key) == EXPECTED_ASSETS
    deps = {key: {"/".join(d["path"]) for d in node["dependencyKeys"]} for key, node in by_key.items()}
    assert deps["chunks"] == {"preflight", "corpus_documents"}
    assert deps["evalset"] == {"preflight", "evalset_file"}
    assert deps["corpus_documents"] == {"preflight", "corpus_files"}
    assert deps["gold_labels"] == {"preflight", "evalset", "corpus_documents", "chunks"}
    assert deps["retrieval_results"] == {"retriever_config", "evalset", "chunks", "bm25_index",
                                         "dense_index/all-MiniLM-L6-v2__torch"}
    assert deps["answers"] == {"evalset", "chunks", "retrieval_results"}
    assert deps["judged_answers"] == {"evalset", "answers"}
    assert by_key["evalset"]["groupName"] == "inputs"


def test_only_steps_that_call_an_llm_take_a_slot_of_the_llm_pool(tmp_path):
    from rag_eval_assets.definitions import build_defs

    sample = REPO / "data" / "sample"
    base = (f"corpus: {{id: s, path: {sample / 'corpus'}}}\n"
            f"evalset: {{name: s, path: {sample / 'evalsets' / 'eval_set.jsonl'}}}\n")
    pools = {}
    for name, extra in (("offline", ""),
                        ("llm judge, extractive answers", "llm: {base_url: 'http://127.0.0.1:9/v1', model: m}\n"),
                        ("llm answers", "llm: {base_url: 'http://127.0.0.1:9/v1', model: m}\n"
                                        "answering: {answerer: llm}\njudge: {enabled: false}\n"),
                        ("ragas' llm metrics", "llm: {base_url: 'http://127.0.0.1:9/v1', model: m}\n"
                                               "ragas: {llm_metrics: true}\n")):
        config = tmp_path / f"{len(pools)}.yaml"
        config.write_text(base + extra, encoding="utf-8")
        defs = build_defs(config)
        pools[name] = {key: defs.resolve_assets_def(key).op.pool
                       for key in ("answers", "judged_answers", "generated_queries", "answer_metrics_per_query")}
    assert pools == {
        "offline": dict.fromkeys(("answers", "judged_answers", "generated_queries", "answer_metrics_per_query")),
        # ragas' LLM metrics are off unless asked for: scoring the answers then calls no LLM.
        "llm judge, extractive answers": {"answers": None, "judged_answers": "llm", "generated_queries": "llm",
                                          "answer_metrics_per_query": None},
        "llm answers": {"answers": "llm", "judged_answers": None, "generated_queries": "llm",
                        "answer_metrics_per_query": None},
        "ragas' llm metrics": {"answers": None, "judged_answers": "llm", "generated_queries": "llm",
                               "answer_metrics_per_query": "llm"},
    }
