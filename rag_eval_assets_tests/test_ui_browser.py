"""The Dagster UI as a person uses it: `dagster dev` (webserver and daemon) driven through Debian's Chromium.

The first test reads the asset catalog and the lineage graph, launches a materialization of `evalset` with the UI's
own Materialize button, and checks through GraphQL and the files on disk that the run really happened. The second
runs a sweep of three BM25 variants twice with `rag-eval run` (one variant broken in the second run), checks the
verdict against the baseline per variant, and reads the best and the confidence set of the best per k in
evaluation_run's metadata in the UI. Screenshots land in test-artifacts/ui/.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_eval_assets.evalset.freeze import eval_set_version, evalset_sha256
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets_tests.real_components import CHROMIUM, CHROMIUM_ARGS, unavailable
from rag_eval_assets_tests.dagster_server import BIN, REPO, dagster_env, graphql, running_server, wait_for_asset_keys
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.synthetic_beir import write_collection
from rag_eval_assets_tests.waiting import run_to_end

ARTIFACTS = REPO / "test-artifacts" / "ui"
EVALSET_NAME = "sample_eval_set"
EVALSET_FILE = REPO / "data" / "sample" / "evalsets" / "eval_set.jsonl"
CORPUS_DIR = REPO / "data" / "sample" / "corpus"
UI_TIMEOUT_MS = 60_000
RUN_TIMEOUT = 120.0
# Names the lineage graph shows whole (it cuts long ones like retrieval_metrics_per_query in the middle).
GRAPH_NODES = ("evalset", "corpus_documents", "chunks", "gold_labels", "bm25_index", "retrieval_results",
               "evaluation_run", "run_comparison")
TERMINAL_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}

RUN_QUERY = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { runId status assetSelection { path } tags { key value } }
  }
}
"""
RUNS_QUERY = "{ runsOrError { ... on Runs { results { runId } } } }"
MATERIALIZATION_QUERY = """
{
  assetOrError(assetKey: {path: ["evalset"]}) {
    ... on Asset {
      assetMaterializations(limit: 1) {
        runId
        metadataEntries {
          label
          ... on IntMetadataEntry { intValue }
          ... on TextMetadataEntry { text }
        }
      }
    }
  }
}
"""


@pytest.fixture
def browser() -> Iterator:
    # Checked before the server starts: without a browser there is nothing to drive. CI must have one.
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        reason = f"Playwright is not importable ({exc})"
    if reason is None and not CHROMIUM.is_file():
        reason = f"no browser at {CHROMIUM} (`make test` installs Debian's chromium when run as root)"
    if reason is not None:
        unavailable(reason)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def dagster_ui(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`dagster dev` on a fresh instance and fresh storage; yields its URL and the storage directory."""
    storage = tmp_path / "storage"
    config = tmp_path / "rag_eval.yaml"
    config.write_text(
        f"storage_dir: {storage}\n"
        f"runs_dir: {tmp_path / 'runs'}\n"
        f"corpus: {{id: sample, path: {CORPUS_DIR}}}\n"
        f"evalset: {{name: {EVALSET_NAME}, path: {EVALSET_FILE}}}\n",
        encoding="utf-8",
    )
    command = [str(BIN / "dagster"), "dev", "-w", "workspace.yaml"]
    with running_server(command, dagster_env(tmp_path / "dagster_home", config), tmp_path / "dagster.log") as url:
        assert wait_for_asset_keys(url), "the code location did not load"
        # The first visit of a new instance opens a newsletter dialog over the page; dismiss it as a user would once.
        graphql(url, "mutation { setNuxSeen }")
        yield url, storage


def test_materialize_evalset_from_the_ui(browser, dagster_ui, tmp_path):
    from playwright.sync_api import expect  # importable: the browser fixture skipped or failed otherwise

    url, storage = dagster_ui
    asset_keys = wait_for_asset_keys(url)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    page.set_default_timeout(UI_TIMEOUT_MS)

    page.goto(f"{url}/assets")
    for key in sorted(asset_keys):
        # The catalog shows each name in a link to the asset's page (a `title` holds the name when it is cut short);
        # prefixed keys (dense_index/<model>) are listed under a link to their prefix.
        if "/" in key:
            page.get_by_role("link").filter(has_text=key.split("/")[0]).first.wait_for()
        else:
            page.get_by_role("link").filter(has=page.get_by_title(key, exact=True)).wait_for()

    page.goto(f"{url}/asset-groups")
    page.locator('[aria-haspopup="dialog"]:has([aria-label="settings"])').click()  # the graph's settings menu
    page.get_by_role("menuitem", name="Expand all groups").click()
    page.keyboard.press("Escape")
    nodes = [page.get_by_text(key, exact=True).first for key in GRAPH_NODES]
    for node in nodes:
        node.wait_for()
    # A double click on the canvas (not on a node) zooms the whole graph into view.
    page.locator("svg").filter(has=nodes[0]).dispatch_event("dblclick")
    for node in nodes:
        expect(node).to_be_in_viewport(ratio=1)
    page.screenshot(path=ARTIFACTS / "asset_graph.png")

    page.goto(f"{url}/assets/evalset")
    page.get_by_role("button").filter(has_text=re.compile(r"^Materialize$")).click()
    # evalset's upstream `preflight` (checks only, no table) was never materialized: the UI asks before launching.
    page.get_by_role("button", name="Confirm").click()
    toast = page.get_by_text(re.compile(r"Launched run [0-9a-f]{8}"))
    short_id = re.search(r"[0-9a-f]{8}", toast.inner_text()).group(0)
    run = _wait_for_run(url, short_id)

    assert run["status"] == "SUCCESS", f"{run}; the server's log: {tmp_path / 'dagster.log'}"
    assert run["assetSelection"] == [{"path": ["evalset"]}]
    assert {"key": "dagster/from_ui", "value": "true"} in run["tags"]

    questions = load_evalset(EVALSET_FILE, None)
    version = eval_set_version(EVALSET_NAME, evalset_sha256(EVALSET_FILE))
    asset = graphql(url, MATERIALIZATION_QUERY)["assetOrError"]
    [materialization] = asset["assetMaterializations"]
    metadata = {e["label"]: e.get("intValue", e.get("text")) for e in materialization["metadataEntries"]}
    assert materialization["runId"] == run["runId"]
    assert metadata["questions"] == len(questions)
    assert metadata["eval_set_version"] == version
    table = stored_table(storage / "assets", "evalset")
    assert list(table["id"]) == [q.id for q in questions]

    page.reload()
    # "Latest materialization": a success icon beside a link to the run the button launched.
    page.locator(f'div:has(> [aria-label="run_success"]) > a[href^="/runs/{run["runId"]}"]').wait_for()
    page.screenshot(path=ARTIFACTS / "evalset_materialized.png")


def _wait_for_run(url: str, short_id: str) -> dict:
    """The run the UI launched, once it has finished: queued, dequeued by the daemon, then executed."""
    run_ids = [r["runId"] for r in graphql(url, RUNS_QUERY)["runsOrError"]["results"]]
    [run_id] = [r for r in run_ids if r.startswith(short_id)]
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        run = graphql(url, RUN_QUERY, {"runId": run_id})["runOrError"]
        if run["status"] in TERMINAL_STATUSES:
            return run
        assert time.monotonic() < deadline, f"run {run_id} still {run['status']} after {RUN_TIMEOUT:.0f}s"
        time.sleep(1)


# The sweep on the generated BEIR collection (synthetic_beir.py; nDCG by hand in test_pipeline_verdict.py): at k = 1
# k1 0.9 finds 62 of 66 queries' document first, k1 1.0 64 (the same ones and two more), k1 0.05 with b 0 none.
SWEEP = {"bm25_k1-0.9": (0.9, 0.4), "bm25_k1-1.0": (1.0, 0.4), "bm25_trial": (0.9, 0.4)}
BROKEN = (0.05, 0.0)


def _sweep_config(tmp: Path, collection: Path, variants: dict[str, tuple[float, float]]) -> Path:
    path = tmp / "rag_eval.yaml"
    retrievers = ", ".join(f"{name}: {{kind: bm25, k1: {k1}, b: {b}}}" for name, (k1, b) in variants.items())
    path.write_text(
        f"storage_dir: {tmp / 'store'}\n"
        f"corpus: {{id: synthetic, path: {collection}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {collection}}}\n"
        "chunking: {chunk_size_chars: 100000, overlap_chars: 0}\n"
        f"retrievers: {{{retrievers}}}\nk_values: [1, 5]\n"
        "answering: {k_values: [5]}\nretrieval: {level: doc}\n",
        encoding="utf-8",
    )
    return path


def test_a_sweep_shows_its_best_and_the_set_in_the_ui_and_is_judged_per_variant(browser, tmp_path):
    from playwright.sync_api import expect  # importable: the browser fixture skipped or failed otherwise

    collection = write_collection(tmp_path / "beir")
    env = dagster_env(tmp_path / "home", tmp_path / "rag_eval.yaml")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])

    def rag_eval_run(variants: dict[str, tuple[float, float]]) -> int:
        # A process of its own, as a person runs it (and away from the browser's event loop).
        config = _sweep_config(tmp_path, collection, variants)
        done = run_to_end([sys.executable, "-m", "rag_eval_assets.cli", "--config", str(config), "run"], cwd=tmp_path,
                          env=env)
        return done.returncode

    # The baseline: bm25_trial is bm25_k1-0.9 under another name. Then the trial is broken: worse, it alone.
    assert rag_eval_run(SWEEP) == 0
    assert rag_eval_run({**SWEEP, "bm25_trial": BROKEN}) == 1
    runs = sorted((p for p in (tmp_path / "store" / "runs").iterdir() if not p.name.startswith(".")),
                  key=lambda p: json.loads((p / "metrics.json").read_text())["run"]["created_at"] + p.name)
    comparison = json.loads((runs[-1] / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["verdict"] == "worse"
    assert {c["retriever"] for c in comparison["cells"] if c["result"] == "worse"} == {"bm25_trial"}
    assert {c["result"] for c in comparison["cells"] if c["retriever"] != "bm25_trial"} == {"no significant change"}
    baseline = (runs[0] / "summary.md").read_text(encoding="utf-8")
    # Identical variants are in or out together: in the baseline the trial is in the set beside its twin.
    assert ("- k=1: bm25_k1-1.0 best, ndcg@k 0.970 vs bm25_k1-0.9 0.939; 3 variants may be the best at alpha 0.05 "
            "(all): bm25_k1-1.0, bm25_k1-0.9, bm25_trial") in baseline
    summary = (runs[-1] / "summary.md").read_text(encoding="utf-8")
    assert ("- k=1: bm25_k1-1.0 best, ndcg@k 0.970 vs bm25_k1-0.9 0.939; 2 variants may be the best at alpha 0.05: "
            "bm25_k1-1.0, bm25_k1-0.9") in summary
    # The second run sweeps k1 and b: one table and chart each, b's lines per k1.
    assert "## The sweep (k=1)" in summary and "| k1 | b = 0.0 | b = 0.4 |" in summary

    with running_server([str(BIN / "dagster-webserver"), "-w", "workspace.yaml"], env, tmp_path / "web.log") as url:
        wait_for_asset_keys(url)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.set_default_timeout(UI_TIMEOUT_MS)
        graphql(url, "mutation { setNuxSeen }")  # the newsletter dialog a new instance opens with
        page.goto(f"{url}/assets/evaluation_run")
        # The `best` entry is a table the Metadata section shows in place: one row per k.
        best = page.locator("table:not(:has(table))", has=page.locator("th", has_text="may_be_best"))
        rows = best.locator("tbody tr")
        expect(rows).to_have_count(2)  # k = 1 and k = 5
        assert best.locator("th").all_inner_texts() == ["k", "metric", "best", "value", "set_size", "may_be_best"]
        assert [rows.nth(i).locator("td").all_inner_texts() for i in range(2)] == [
            ["1", "ndcg@k", "bm25_k1-1.0", "0.9697", "2", "bm25_k1-1.0, bm25_k1-0.9"],
            ["5", "ndcg@k", "bm25_k1-1.0", "0.9888", "2", "bm25_k1-1.0, bm25_k1-0.9"]]
        best.scroll_into_view_if_needed()
        expect(best).to_be_in_viewport()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=ARTIFACTS / "evaluation_run_best.png")
        page.close()
