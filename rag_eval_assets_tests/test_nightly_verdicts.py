"""Nights say what they are, as an operator meets them under `make ui` (`dagster dev`: webserver, daemon and the
code location's server) with the default `alerts.on` and a loopback webhook, each night started and followed by
`rag-eval nightly --wait` on a generated BEIR collection:

1. a first night: complete, no baseline, exit 0, no alert;
2. rag_eval.yaml edited (bm25 broken on purpose) while the code location holds the old file: the sensor refuses to
   plan from the old configuration, and the command says so, how to reload, and exits 2; nothing is committed; a
   materialization the UI launches (its Materialize, through GraphQL) and an asset backfill are refused alike,
   before any step materializes anything; once the code location is reloaded (the UI's Reload, through GraphQL) the
   sensor carries that night on, from the edited file;
3. the next night runs the edited file and is WORSE, with its deciding cells, exit 1, no advice to re-execute, one
   alert;
4. a document added to the corpus: INCOMPATIBLE with the reason, exit 2, one alert (default alerts.on leaves the
   incompatible verdict out, so the failure sensor sends the verdict's alert).

The nights share one server and run in file order."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.defs.night_story import NIGHT_TAG
from rag_eval_assets.defs.jobs import INPUTS_JOB, METRICS_JOB
from rag_eval_assets.defs.loaded_config import CHANGED, RELOAD
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets_tests.dagster_server import BIN, REPO, dagster_env, graphql, running_server, wait_for_asset_keys
from rag_eval_assets_tests.nightly_host import night_runs
from rag_eval_assets_tests.synthetic_beir import write_collection
from rag_eval_assets_tests.waiting import run_to_end, wait_for
from rag_eval_assets_tests.webhook_receiver import webhook_receiver

HOOK_ENV = "RAG_EVAL_TEST_NIGHT_HOOK"
GOOD, BROKEN = (0.9, 0.4), (0.05, 0.0)
LOCATION = "rag_eval_assets.definitions"
RELOAD_LOCATION = """mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) {
  __typename ... on WorkspaceLocationEntry { name } } }"""
LOCATIONS = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
REPOSITORY = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""


def _write_config(path: Path, collection: Path, bm25: tuple[float, float]) -> None:
    path.write_text(
        f"storage_dir: {path.parent / 'store'}\n"
        f"corpus: {{id: synthetic, path: {collection}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {collection}}}\n"
        "chunking: {chunk_size_chars: 100000, overlap_chars: 0}\n"
        "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
        f"retrieval: {{level: doc, bm25: {{k1: {bm25[0]}, b: {bm25[1]}}}}}\n"
        f"alerts: {{webhook_url_env: {HOOK_ENV}}}\n",
        encoding="utf-8",
    )


def _launched_from_the_ui(url: str, instance: dg.DagsterInstance, watch: Path) -> dict[str, tuple]:
    """retrieval_results[bm25] launched as the UI launches it: its Materialize (the implicit asset job) and an asset
    backfill of the partition; each run's status, its errors and what it materialized, once it has ended."""
    [repository] = graphql(url, REPOSITORY)["repositoriesOrError"]["nodes"]
    selector = {"repositoryLocationName": repository["location"]["name"], "repositoryName": repository["name"],
                "pipelineName": "__ASSET_JOB", "assetSelection": [{"path": ["retrieval_results"]}],
                "assetCheckSelection": []}
    launched = graphql(url, LAUNCH, {"params": {
        "selector": selector, "runConfigData": "{}",
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "bm25"}]}}})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    backfill = graphql(url, BACKFILL, {"params": {"assetSelection": [{"path": ["retrieval_results"]}],
                                                  "partitionNames": ["bm25"]}})["launchPartitionBackfill"]
    assert backfill["__typename"] == "LaunchBackfillSuccess", backfill

    def ended(run_id: str | None = None, backfill_id: str | None = None):
        runs = [instance.get_run_by_id(run_id)] if run_id else instance.get_runs(
            dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        return runs[0] if runs and runs[0].is_finished else None

    found = {}
    for name, run in (("materialize", wait_for(lambda: ended(run_id=launched["run"]["runId"]),
                                               "the UI's materialization to end", watch)),
                      ("backfill", wait_for(lambda: ended(backfill_id=backfill["backfillId"]),
                                            "the backfill's run to end", watch))):
        entries = instance.all_logs(run.run_id)
        errors = []
        for entry in entries:
            error = entry.error_info or getattr(
                entry.dagster_event.event_specific_data if entry.dagster_event else None, "error", None)
            while error is not None:
                errors.append(error.message)
                error = error.cause
        materialized = [e for e in entries if e.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION]
        found[name] = (run.status, errors, materialized)
    return found


def _reload(url: str, watch: Path) -> None:
    """The UI's Reload of the code location, then until it has loaded again."""
    reloaded = graphql(url, RELOAD_LOCATION, {"name": LOCATION})["reloadRepositoryLocation"]
    assert reloaded["__typename"] == "WorkspaceLocationEntry", reloaded

    def loaded() -> bool:
        entries = graphql(url, LOCATIONS)["workspaceOrError"]["locationEntries"]
        return all(entry["loadStatus"] == "LOADED" for entry in entries)

    wait_for(loaded, "the code location to load again", watch)


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("night_verdicts")
    collection = write_collection(tmp / "beir")
    config = tmp / "rag_eval.yaml"
    _write_config(config, collection, GOOD)
    store = TableStore(tmp / "store" / "assets")
    found: dict = {"tmp": tmp}
    with webhook_receiver() as hook:
        env = {**dagster_env(tmp / "home", config), HOOK_ENV: hook.url}
        with running_server([str(BIN / "dagster"), "dev", "-w", "workspace.yaml"], env, tmp / "dagster.log") as url:
            assert wait_for_asset_keys(url), "the code location did not load"
            started = subprocess.run([str(BIN / "dagster"), "sensor", "start", "nightly_progress", "-w",
                                      "workspace.yaml"], cwd=REPO, env=env, capture_output=True, text=True)
            assert started.returncode == 0, started.stdout + started.stderr

            def night(name: str) -> None:
                before, alerts = set(list_runs(tmp / "store" / "runs")), len(hook.received)
                began = time.monotonic()
                done = run_to_end([str(BIN / "rag-eval"), "--config", str(config), "nightly", "--wait"], cwd=tmp,
                                  env=env, watch=tmp)
                seconds = time.monotonic() - began
                # The failure sensor posts after the run has ended: give it the ticks it needs to.
                if done.returncode != 0 and name != "edited":
                    wait_for(lambda: len(hook.received) > alerts, "the night's alert", tmp)
                print(f"\n{name}: exit {done.returncode} after {seconds:.0f} s\n{done.stdout}{done.stderr}")
                found[name] = {"code": done.returncode, "stdout": done.stdout, "alerts": hook.received[alerts:],
                               "dirs": [p for p in list_runs(tmp / "store" / "runs") if p not in before],
                               "committed": store.current().get("pipeline")}

            night("good")
            _write_config(config, collection, BROKEN)
            night("edited")
            edited = _night_of(_last(found["edited"]["stdout"]))
            with dg.DagsterInstance.from_config(str(tmp / "home")) as instance:
                found["edited_jobs_refused"] = {run.job_name for run in night_runs(instance, edited)}
                found["edited_ui_runs"] = _launched_from_the_ui(url, instance, tmp)
                _reload(url, tmp)
                # Reloaded, the sensor carries the stopped night on, from the file as it is now.
                found["edited_after_reload"] = wait_for(lambda: next(
                    (run.status for run in night_runs(instance, edited)
                     if run.job_name == METRICS_JOB and run.is_finished), None), "the edited night's report", tmp)
            night("worse")
            with (collection / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
                corpus.write(json.dumps({"_id": "added", "title": "", "text": "a note added after the baseline"})
                             + "\n")
            night("incompatible")
            with dg.DagsterInstance.from_config(str(tmp / "home")) as instance:
                found["metrics_runs"] = {run.tags[NIGHT_TAG]: run.status for run in instance.get_runs(
                    dg.RunsFilter(job_name=METRICS_JOB))}
    return found


def _night_of(stdout: str) -> str:
    return stdout.split("night ", 1)[1].split(":", 1)[0]


def _last(stdout: str) -> str:
    return stdout.strip().splitlines()[-1]


def test_a_first_night_is_complete_with_nothing_to_compare(nights):
    good = nights["good"]
    assert good["code"] == 0, good["stdout"]
    (run_dir,) = good["dirs"]
    lines = good["stdout"].strip().splitlines()
    assert lines[-2].endswith(f"is complete, its tables committed; run directory {run_dir}, report "
                              f"{run_dir / 'report.html'}")
    assert lines[-1] == "verdict: no baseline run yet: nothing to compare"
    assert good["alerts"] == [] and good["committed"].startswith("nightly-")


def test_an_edited_configuration_is_refused_until_the_code_location_is_reloaded(nights):
    good, edited = nights["good"], nights["edited"]
    assert edited["code"] == 2, edited["stdout"]
    night = _night_of(_last(edited["stdout"]))
    assert _last(edited["stdout"]).startswith(f"night {night}: {CHANGED} ({nights['tmp'] / 'rag_eval.yaml'}: ")
    assert _last(edited["stdout"]).endswith(RELOAD)
    # Nothing planned from the old file: only the night's first run (planned by the command, from the file as it
    # is), no report, nothing committed, no alert.
    assert nights["edited_jobs_refused"] == {INPUTS_JOB}
    assert edited["dirs"] == [] and edited["committed"] == good["committed"] and edited["alerts"] == []
    # A run the UI launched from the old code location, a materialization or a backfill, stops before any step
    # materializes anything, saying why and how to reload.
    for name, (status, errors, materialized) in nights["edited_ui_runs"].items():
        assert status == dg.DagsterRunStatus.FAILURE and materialized == [], (name, errors)
        said = [error for error in errors if f"{CHANGED} ({nights['tmp'] / 'rag_eval.yaml'}: " in error]
        assert said and all(RELOAD in error for error in said), (name, errors)
    # Once reloaded, the sensor carried that night on with the edited file: its broken bm25 made it worse.
    assert nights["edited_after_reload"] == dg.DagsterRunStatus.FAILURE
    assert nights["metrics_runs"][night] == dg.DagsterRunStatus.FAILURE


def test_a_worse_night_says_worse_with_its_deciding_cells(nights):
    good, worse = nights["good"], nights["worse"]
    assert worse["code"] == 1, worse["stdout"]
    (run_dir,) = worse["dirs"]
    last = _last(worse["stdout"])
    night = _night_of(last)
    assert last.startswith(f"night {night}: WORSE against run {good['dirs'][0].name}, decided by bm25@1 ndcg@k ")
    assert "re-execute" not in worse["stdout"]
    comparison = json.loads((run_dir / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["verdict"] == "worse" and nights["metrics_runs"][night] == dg.DagsterRunStatus.FAILURE
    (alert,) = worse["alerts"]
    assert alert["text"].startswith(f"rag-eval: WORSE — synthetic@") and run_dir.name in alert["text"]
    assert worse["committed"] == good["committed"]


def test_an_incompatible_night_says_why_and_alerts_once_under_the_default_alerts_on(nights):
    good, incompatible = nights["good"], nights["incompatible"]
    assert incompatible["code"] == 2, incompatible["stdout"]
    (run_dir,) = incompatible["dirs"]
    last = _last(incompatible["stdout"])
    assert last.startswith(f"night {_night_of(last)}: INCOMPATIBLE against run {good['dirs'][0].name}: invariant "
                           "corpus_sha256 (version_tuple.dataset.corpus_sha256) differs: base=")
    assert "re-execute" not in incompatible["stdout"]
    (alert,) = incompatible["alerts"]
    assert alert["text"].startswith("rag-eval: INCOMPATIBLE — synthetic@") and run_dir.name in alert["text"]
    assert "incompatible: invariant corpus_sha256" in alert["text"]
    assert incompatible["committed"] == good["committed"]
