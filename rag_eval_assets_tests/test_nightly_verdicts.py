"""Nights say what they are, as an operator meets them under `make ui` (`dagster dev`: webserver, daemon and the
code location's server) with the default `alerts.on` and a loopback webhook, each night started and followed by
`rag-eval nightly --wait` on a generated BEIR collection:

1. a first night: complete, no baseline, exit 0, no alert;
2. rag_eval.yaml edited (bm25 broken on purpose) while the code location holds the old file: a materialization the
   UI launches (its Materialize, through GraphQL) and an asset backfill are refused, saying why and how to reload,
   before any step materializes anything, and alert nobody; `rag-eval nightly --wait` makes its night from the file
   as it is, so the edited configuration runs and the night is WORSE, with its deciding cells, exit 1, no advice to
   re-execute, nothing committed, one alert;
3. the UI's Reload (through GraphQL), then a document added to the corpus: INCOMPATIBLE with the reason, exit 2, one
   alert (the default alerts.on leaves the incompatible verdict out, so the failure sensor sends the verdict's alert).

Each night is one run of nightly_job, and every run its pipeline executed carries the night's tag; `--wait` names
each of them as it ends. The nights share one server and run in file order."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, GRID_JOB, INPUTS_JOB, METRICS_JOB
from rag_eval_assets.defs.loaded_config import CHANGED, RELOAD
from rag_eval_assets.defs.night_story import NIGHT_TAG, NIGHTLY_JOB, pipeline_runs
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets_tests.dagster_server import BIN, dagster_env, graphql, running_server, wait_for_asset_keys
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
        with running_server([str(BIN / "dagster"), "dev", "-w", "workspace.yaml"], env, tmp / "dagster.log") as url, \
                dg.DagsterInstance.from_config(str(tmp / "home")) as instance:
            assert wait_for_asset_keys(url), "the code location did not load"

            def night(name: str) -> None:
                before, alerts = set(list_runs(tmp / "store" / "runs")), len(hook.received)
                began = time.monotonic()
                done = run_to_end([str(BIN / "rag-eval"), "--config", str(config), "nightly", "--wait"], cwd=tmp,
                                  env=env, watch=tmp)
                seconds = time.monotonic() - began
                # A night that did not end well alerts: the report sends a worse verdict's alert, the failure sensor
                # the others after the night's run has ended; give it the ticks it needs to.
                if done.returncode != 0:
                    wait_for(lambda: len(hook.received) > alerts, "the night's alert", tmp)
                print(f"\n{name}: exit {done.returncode} after {seconds:.0f} s\n{done.stdout}{done.stderr}")
                runs = night_runs(instance, _night_of(done.stdout))
                found[name] = {"code": done.returncode, "stdout": done.stdout, "alerts": hook.received[alerts:],
                               "dirs": [p for p in list_runs(tmp / "store" / "runs") if p not in before],
                               "committed": store.current().get("pipeline"),
                               "night_runs": [run for run in runs if run.job_name == NIGHTLY_JOB],
                               "tagged": {run.run_id for run in runs}}
                found[name]["pipeline"] = [pipeline_runs(instance, run) for run in found[name]["night_runs"]]

            night("good")
            _write_config(config, collection, BROKEN)
            found["edited_ui_runs"] = _launched_from_the_ui(url, instance, tmp)
            night("edited")
            _reload(url, tmp)
            with (collection / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
                corpus.write(json.dumps({"_id": "added", "title": "", "text": "a note added after the baseline"})
                             + "\n")
            night("incompatible")
            # The failure sensor takes the runs' failures in order and has alerted for the last night's: whatever
            # it would have sent for an earlier run (the refused UI runs, the worse night) has come by now.
            found["all_alerts"] = list(hook.received)
    return found


def _night_of(stdout: str) -> str:
    return stdout.split("night ", 1)[1].split(":", 1)[0]


def _last(stdout: str) -> str:
    return stdout.strip().splitlines()[-1]


def _printed_runs(stdout: str) -> list[tuple[str, str | None, str, str]]:
    """The pipeline's runs `--wait` named as they ended: (job, partition, status, run id)."""
    return [match.groups() for match in re.finditer(r"^  (\S+)(?: \[(.+)\])?: (\w+) \(run (\S+)\)$", stdout,
                                                    flags=re.MULTILINE)]


@pytest.mark.parametrize("name, jobs, ended", [
    ("good", [(INPUTS_JOB, None), (GRID_JOB, "bm25"), (ANSWER_GRID_JOB, "5|bm25"), (METRICS_JOB, None)],
     dg.DagsterRunStatus.SUCCESS),
    # The edit changed bm25's parameters only: the inputs stayed current.
    ("edited", [(GRID_JOB, "bm25"), (ANSWER_GRID_JOB, "5|bm25"), (METRICS_JOB, None)],
     dg.DagsterRunStatus.FAILURE),
    ("incompatible", [(INPUTS_JOB, None), (GRID_JOB, "bm25"), (ANSWER_GRID_JOB, "5|bm25"),
                      (METRICS_JOB, None)], dg.DagsterRunStatus.FAILURE),
])
def test_a_night_is_one_run_whose_pipeline_runs_carry_its_tag(nights, name, jobs, ended):
    found = nights[name]
    night = _night_of(found["stdout"])
    (night_run,) = found["night_runs"]
    (pipeline,) = found["pipeline"]
    assert night_run.status == ended and night_run.tags[PIPELINE_TAG] == f"nightly-{night}"
    assert found["stdout"].startswith(f"night {night}: run {night_run.run_id} ({NIGHTLY_JOB}) is in the run queue\n"
                                      f"follow it in the UI: Runs, tag {NIGHT_TAG}={night}\n")
    # What the night's run executed, stage by stage, each a run of its pipeline tagged with the night: the runs
    # tagged with it are these and its own, nothing else.
    oldest_first = list(reversed(pipeline))
    assert [(run.job_name, run.tags.get("dagster/partition")) for run in oldest_first] == jobs
    assert all(run.tags[NIGHT_TAG] == night and run.tags[PIPELINE_TAG] == f"nightly-{night}" for run in pipeline)
    assert found["tagged"] == {night_run.run_id} | {run.run_id for run in pipeline}
    # --wait named each as it ended.
    assert _printed_runs(found["stdout"]) == [
        (run.job_name, run.tags.get("dagster/partition"), run.status.value.lower(), run.run_id) for run in oldest_first]


def test_a_first_night_is_complete_with_nothing_to_compare(nights):
    good = nights["good"]
    assert good["code"] == 0, good["stdout"]
    (run_dir,) = good["dirs"]
    lines = good["stdout"].strip().splitlines()
    assert lines[-2].endswith(f"is complete, its tables committed; run directory {run_dir}, report "
                              f"{run_dir / 'report.html'}")
    assert lines[-1] == "verdict: no baseline run yet: nothing to compare"
    assert good["alerts"] == [] and good["committed"] == f"nightly-{_night_of(good['stdout'])}"


def test_an_edited_configuration_refuses_the_old_code_locations_runs_and_its_night_runs_the_file_as_it_is(nights):
    # A run the UI launched from the code location that holds the old file, a materialization or a backfill, stops
    # before any step materializes anything, saying why and how to reload.
    for name, (status, errors, materialized) in nights["edited_ui_runs"].items():
        assert status == dg.DagsterRunStatus.FAILURE and materialized == [], (name, errors)
        said = [error for error in errors if f"{CHANGED} ({nights['tmp'] / 'rag_eval.yaml'}: " in error]
        assert said and all(RELOAD in error for error in said), (name, errors)
    # `rag-eval nightly` made its night from the file as it is: the broken bm25 ran, and the night is worse.
    good, edited = nights["good"], nights["edited"]
    assert edited["code"] == 1, edited["stdout"]
    (run_dir,) = edited["dirs"]
    last = _last(edited["stdout"])
    assert last.startswith(f"night {_night_of(last)}: WORSE against run {good['dirs'][0].name}, decided by bm25@1 "
                           "ndcg@k ")
    assert "re-execute" not in edited["stdout"]
    ran = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["settings"]["retrieval"]["bm25"]
    assert (ran["k1"], ran["b"]) == BROKEN
    comparison = json.loads((run_dir / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["verdict"] == "worse"
    (alert,) = edited["alerts"]
    assert alert["text"].startswith("rag-eval: WORSE — synthetic@") and run_dir.name in alert["text"]
    assert edited["committed"] == good["committed"]


def test_an_incompatible_night_says_why_and_alerts_once_under_the_default_alerts_on(nights):
    good, edited, incompatible = nights["good"], nights["edited"], nights["incompatible"]
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
    # Over the whole scenario: one alert per night that did not end well, none for the refused UI runs.
    assert nights["all_alerts"] == edited["alerts"] + incompatible["alerts"]
