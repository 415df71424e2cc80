"""The Dagster UI as a person uses it: `dagster dev` (webserver and daemon) driven through Debian's Chromium.

The test reads the asset catalog and the lineage graph, launches a materialization of `evalset` with the UI's own
Materialize button, and checks through GraphQL and the files on disk that the run really happened. Screenshots of
the graph and of the materialized asset land in test-artifacts/ui/.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_eval_assets.evalset.freeze import eval_set_version, evalset_sha256
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets_tests.real_components import CHROMIUM, CHROMIUM_ARGS, unavailable
from rag_eval_assets_tests.dagster_server import BIN, REPO, dagster_env, graphql, running_server, wait_for_asset_keys
from rag_eval_assets_tests.stored_tables import stored_table

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
