"""The jobs that fan out on a real Dask cluster from rag_eval.yaml's `execution.dask` alone: a `dask scheduler` and two
`dask worker` processes started from their command line on loopback, `dagster dev` (webserver and daemon) on the
same configuration. A night (one nightly_job run the daemon takes from the queue, whose op executes the
pipeline's runs), `rag-eval run --force`, a `rag-eval backfill` the daemon runs, a materialization and its re-execution launched
through the webserver's GraphQL API all execute their steps on the workers (which worker ran which step is read from
the scheduler, and printed); a worker killed while its step runs has that step run again on the other.

The tests share one cluster and server and run in file order: the last one kills a worker."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.definitions import build_defs
from rag_eval_assets.defs.night_story import NIGHT_TAG, NIGHTLY_JOB, pipeline_runs
from rag_eval_assets.defs.cluster_resources import RESOURCE_REQUIREMENTS_TAG
from rag_eval_assets.defs.executors import EXECUTOR_TAG, SCHEDULER_TAG
from rag_eval_assets.defs.run_log import LOG_FILE
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, CLUSTER_JOBS, INPUTS_JOB, METRICS_JOB, pipeline_stages
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.dagster_server import (
    BIN, REPO, dagster_env, graphql, running_server, wait_for_asset_keys,
)
from rag_eval_assets_tests.dask_cluster import DaskCluster, dask_cluster, steps_by_worker
from rag_eval_assets_tests.llm_fault_server import llm_fault_server, schema_reply
from rag_eval_assets_tests.nightly_host import night_runs
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.test_cli_terminal import _not_ours
from rag_eval_assets_tests.test_ui_browser import ARTIFACTS, UI_TIMEOUT_MS, browser  # noqa: F401 (a fixture)
from rag_eval_assets_tests.waiting import IDLE_S, run_to_end, wait_for

ADDRESS_ENV = "RAG_EVAL_DASK"
TERMINAL = ("SUCCESS", "FAILURE", "CANCELED")
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
REEXECUTE = """mutation($parent: String!) {
  launchRunReexecution(reexecutionParams: {parentRunId: $parent, strategy: ALL_STEPS}) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
RUN = """query($runId: ID!) { runOrError(runId: $runId) { ... on Run { status jobName } } }"""
REPOSITORY = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"


class LLMGate:
    """The LLM server's responder: valid replies, except that once armed, the first request waits for `release`
    (the step that sent it is running: the moment to kill its worker)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed = False
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, body):
        with self.lock:
            hold = self.armed and not self.held.is_set()
            if hold:
                self.held.set()
        if hold:
            self.release.wait(IDLE_S)
        return schema_reply(body)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("dask_from_config")
    gate = LLMGate()
    with llm_fault_server(responder=gate) as llm:
        config = write_sample_config(
            tmp,
            "retrievers: [bm25]\nk_values: [1, 3]\n"
            "answering: {k_values: [1, 2], answerer: llm}\njudge: {enabled: false}\n"
            f"llm: {{base_url: '{llm.base_url}', model: m}}\n"
            f"execution: {{dask: {{address_env: {ADDRESS_ENV}}}}}\n",
        )
        env = dagster_env(tmp / "home", config)
        with dask_cluster(tmp / "dask", env) as cluster:
            env[ADDRESS_ENV] = cluster.address
            command = [str(BIN / "dagster"), "dev", "-w", "workspace.yaml"]
            with running_server(command, env, tmp / "dagster.log") as url:
                assert wait_for_asset_keys(url), "the code location did not load"
                yield {"tmp": tmp, "config": config, "env": env, "cluster": cluster, "url": url, "gate": gate,
                       "names": cluster.worker_names()}


def _instance(stack: dict) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(stack["tmp"] / "home"))


def _succeeded_steps(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    return {e.dagster_event.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)}


def _label(run: dg.DagsterRun) -> str:
    partition = run.tags.get("dagster/partition")
    return run.job_name + (f"[{partition}]" if partition else "")


def _show_steps_by_worker(stack: dict, what: str, runs: list[dg.DagsterRun]) -> dict[str, set[tuple[str, str]]]:
    """Print which worker ran which step of `runs` (from the scheduler) and return it: worker -> {(run id, step)}."""
    by_id = {run.run_id: run for run in runs}
    listing = {worker: [(job, step, run_id) for job, step, run_id in steps if run_id in by_id]
               for worker, steps in steps_by_worker(stack["cluster"], stack["names"]).items()}
    print(f"\nper-worker steps of {what}, from the scheduler's task stream:")
    for worker in sorted(listing):
        for _, step, run_id in listing[worker]:
            print(f"  {worker}  {_label(by_id[run_id]):<28} {step:<24} run {run_id[:8]}")
    return {worker: {(run_id, step) for _, step, run_id in steps} for worker, steps in listing.items() if steps}


def _assert_every_step_ran_on_a_worker(stack: dict, what: str, runs: list[dg.DagsterRun]) -> None:
    ran = _show_steps_by_worker(stack, what, runs)
    assert set(ran) <= {"w1", "w2"}
    with _instance(stack) as instance:
        expected = {(run.run_id, step) for run in runs for step in _succeeded_steps(instance, run.run_id)}
    assert expected and set().union(*ran.values()) == expected


def _launch(url: str, job: str, tags: dict[str, str], assets: list[str] | None = None) -> str:
    [repository] = graphql(url, REPOSITORY)["repositoriesOrError"]["nodes"]
    selector = {"repositoryLocationName": repository["location"]["name"], "repositoryName": repository["name"],
                "pipelineName": job}
    if assets is not None:
        selector |= {"assetSelection": [{"path": [a]} for a in assets], "assetCheckSelection": []}
    params = {"selector": selector, "runConfigData": "{}",
              "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
    launched = graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def _finished(stack: dict, run_id: str) -> str:
    """The run's terminal status, waited for as long as the run makes progress (never for a hung run)."""

    def terminal() -> str | None:
        status = graphql(stack["url"], RUN, {"runId": run_id})["runOrError"]["status"]
        return status if status in TERMINAL else None

    return wait_for(terminal, f"run {run_id} to end", stack["tmp"])


def test_encode_steps_ask_for_a_gpu_worker_when_the_device_is_cuda(tmp_path):
    cluster = "execution: {dask: {address: 'tcp://10.0.0.5:8786'}}\n"
    found = {}
    for name, device, extra in (("cuda on a cluster", "cuda", cluster), ("cuda, no cluster", "cuda", ""),
                                ("cpu on a cluster", "cpu", cluster)):
        directory = tmp_path / str(len(found))
        directory.mkdir()
        defs = build_defs(write_sample_config(
            directory, f"retrievers: [bm25, dense]\nretrieval: {{dense: {{device: {device}}}}}\n" + extra))
        [dense_index] = [k for k in defs.resolve_asset_graph().get_all_asset_keys() if k.path[0] == "dense_index"]
        executors = {job: defs.resolve_job_def(job).executor_def.name
                     for job in (*CLUSTER_JOBS, METRICS_JOB, "__ASSET_JOB")}
        found[name] = (defs.resolve_assets_def(dense_index).op.tags.get(RESOURCE_REQUIREMENTS_TAG), executors)
    on_cluster = {**dict.fromkeys(CLUSTER_JOBS, "dask"), METRICS_JOB: "in_process", "__ASSET_JOB": "dask"}
    assert found == {
        "cuda on a cluster": ('{"GPU": 1}', on_cluster),
        # Dagster's own default for the implicit asset job, as before.
        "cuda, no cluster": (None, {**dict.fromkeys(CLUSTER_JOBS, "in_process"), METRICS_JOB: "in_process",
                                    "__ASSET_JOB": "multi_or_in_process_executor"}),
        "cpu on a cluster": (None, on_cluster),
    }


def test_a_night_the_daemon_runs_executes_on_the_workers(stack):
    """A night as the 02:00 schedule starts one (`rag-eval nightly` queues the schedule's request): the daemon
    launches its one nightly_job run from the queue, whose op executes the pipeline's runs; the steps of the
    fanning-out ones run on the workers, the metrics run on the host. The first night on this store: every stage
    has work."""
    done = run_to_end([str(BIN / "rag-eval"), "--config", str(stack["config"]), "nightly", "--wait"],
                      cwd=stack["tmp"], env=stack["env"], watch=stack["tmp"])
    with _instance(stack) as instance:
        failures = [e.message for run in instance.get_runs() for e in instance.all_logs(run.run_id)
                    if e.dagster_event and (e.dagster_event.is_step_failure or (
                        e.dagster_event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
                        and not e.dagster_event.event_specific_data.passed))]
    assert done.returncode == 0, done.stdout + done.stderr + "\n".join(map(str, failures))
    with _instance(stack) as instance:
        [night] = {run.tags[NIGHT_TAG] for run in instance.get_runs() if NIGHT_TAG in run.tags}
        [night_run] = [run for run in night_runs(instance, night) if run.job_name == NIGHTLY_JOB]
        # Queued by `rag-eval nightly`, then launched by the daemon's run coordinator in a process of its own.
        events = [e.dagster_event for e in instance.all_logs(night_run.run_id) if e.dagster_event]
        runs = pipeline_runs(instance, night_run)
        [metrics] = [r for r in runs if r.job_name == METRICS_JOB]
        # The metrics run executed in the night's process (its op), not in a process launched for it.
        metrics_pids = {e.dagster_event.pid for e in instance.all_logs(metrics.run_id,
                                                                       of_type=dg.DagsterEventType.STEP_START)}
    assert [e.event_type for e in events[:2]] == [dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_STARTING]
    [night_pid] = {e.pid for e in events if e.event_type == dg.DagsterEventType.RUN_START}
    assert metrics_pids == {night_pid}
    assert night_run.is_success and night_run.tags[PIPELINE_TAG] == f"nightly-{night}"
    assert done.stdout.splitlines()[0] == f"night {night}: run {night_run.run_id} ({NIGHTLY_JOB}) is in the run queue"
    expected = {(job, key) for job, _, keys in pipeline_stages(load_settings(stack["config"])) for key in keys}
    assert {(run.job_name, run.tags.get("dagster/partition")) for run in runs} == expected
    assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    assert {(run.tags[NIGHT_TAG], run.tags[PIPELINE_TAG]) for run in runs} == {(night, f"nightly-{night}")}
    for run in runs:  # `--wait` printed each as it finished
        partition = run.tags.get("dagster/partition")
        assert f"  {run.job_name}{f' [{partition}]' if partition else ''}: success (run {run.run_id})" in done.stdout
    on_cluster = [run for run in runs if run.job_name in CLUSTER_JOBS]
    _assert_every_step_ran_on_a_worker(stack, "a night (`rag-eval nightly`)", on_cluster)
    address = stack["cluster"].address
    assert all(r.tags[EXECUTOR_TAG] == "dask" and r.tags[SCHEDULER_TAG] == address for r in on_cluster)
    assert not _show_steps_by_worker(stack, "the night's metrics run", [metrics, night_run])
    assert EXECUTOR_TAG not in metrics.tags and EXECUTOR_TAG not in night_run.tags


def test_rag_eval_run_executes_the_fanning_out_jobs_on_the_workers(stack):
    # --force: the night committed every table; the run computes them all again, compared with the night's run.
    done = run_to_end([str(BIN / "rag-eval"), "--config", str(stack["config"]), "run", "--force"], cwd=stack["tmp"],
                      env=stack["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    with _instance(stack) as instance:
        runs = [run for run in instance.get_runs() if NIGHT_TAG not in run.tags]
    assert {run.job_name for run in runs} == {*CLUSTER_JOBS, METRICS_JOB}
    assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
    _assert_every_step_ran_on_a_worker(stack, "`rag-eval run`", [r for r in runs if r.job_name in CLUSTER_JOBS])
    # The metrics and the run directory stay on the host: no task of the metrics run reached the scheduler.
    [metrics] = [r for r in runs if r.job_name == METRICS_JOB]
    assert not _show_steps_by_worker(stack, "the metrics run", [metrics])
    # Each run says where it ran, and rag-eval.log holds the workers' step events and which worker ran each step.
    on_cluster = [r for r in runs if r.job_name in CLUSTER_JOBS]
    address = stack["cluster"].address
    assert all(r.tags[EXECUTOR_TAG] == "dask" and r.tags[SCHEDULER_TAG] == address for r in on_cluster)
    assert EXECUTOR_TAG not in metrics.tags
    (run_dir,) = re.findall(r"^run directory: (.+)$", done.stdout, re.MULTILINE)
    text = (Path(run_dir) / LOG_FILE).read_text(encoding="utf-8")
    with _instance(stack) as instance:
        for run in on_cluster:
            for step in _succeeded_steps(instance, run.run_id):
                assert f"{run.run_id} {step} STEP_SUCCESS" in text
                assert re.search(rf"{run.run_id} - ENGINE_EVENT - step {re.escape(step)} ran on dask worker w[12] ",
                                 text), step
    assert f"executing each step on the dask scheduler at {address}" in text


def test_the_ui_shows_where_a_cluster_run_ran_in_chromium(stack, browser):  # noqa: F811
    """The runs so far (the night's, `rag-eval run`'s) as a person finds them in the UI: the run list shows the
    executor's and the scheduler's tags, and a run's page shows them under "View tags and config", for a run whose
    steps ran on the cluster and not for the metrics run; the scheduler as redaction.py writes it (credentials, were
    there any, masked)."""
    from playwright.sync_api import expect  # importable: the browser fixture skipped or failed otherwise

    with _instance(stack) as instance:
        runs = instance.get_runs()
    on_cluster = [run for run in runs if run.job_name in CLUSTER_JOBS]
    assert on_cluster and all(run.tags.get(EXECUTOR_TAG) == "dask" for run in on_cluster)
    assert not [run for run in runs if run.job_name not in CLUSTER_JOBS and EXECUTOR_TAG in run.tags]
    executor, scheduler = f"{EXECUTOR_TAG}: dask", f"{SCHEDULER_TAG}: {redact_url(stack['cluster'].address)}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(f"{stack['url']}/runs")
    page.locator(f'a[href="/runs/{runs[0].run_id}"]').first.wait_for()
    # A row shows a few of its run's tags beside "View all tags": at least the cluster's on some row, on no more rows
    # than ran on the cluster.
    for tag in (executor, scheduler):
        expect(page.get_by_text(tag, exact=True).first).to_be_visible()
        assert page.get_by_text(tag, exact=True).count() <= len(on_cluster)
    page.screenshot(path=ARTIFACTS / "cluster_runs.png")
    metrics = next(run for run in runs if run.job_name == METRICS_JOB)
    for run, shown in ((on_cluster[0], 1), (metrics, 0)):
        page.goto(f"{stack['url']}/runs/{run.run_id}")
        page.get_by_role("button", name="View tags and config").click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_text("Tags", exact=True).wait_for()
        expect(dialog.get_by_text(executor, exact=True)).to_have_count(shown)
        expect(dialog.get_by_text(scheduler, exact=True)).to_have_count(shown)
        if shown:
            page.screenshot(path=ARTIFACTS / "cluster_run_tags.png")


def test_an_input_error_on_the_cluster_exits_2_and_says_why_first(stack):
    """README's exit codes with execution.dask: a bad evalset line fails preflight on a worker; `rag-eval run` exits
    2, its first line names the file, line and field, and stderr holds rag-eval's own lines only."""
    directory = stack["tmp"] / "bad_input"
    directory.mkdir()
    lines = SAMPLE_EVALSET.read_text(encoding="utf-8").splitlines()[:3]
    second = json.loads(lines[1])
    second["question"] = 42
    evalset = directory / "eval_set.jsonl"
    evalset.write_text("\n".join([lines[0], json.dumps(second), lines[2]]) + "\n", encoding="utf-8")
    config = directory / "rag_eval.yaml"
    config.write_text(stack["config"].read_text(encoding="utf-8")
                      .replace(f"storage_dir: {stack['tmp'] / 'store'}", f"storage_dir: {directory / 'store'}")
                      .replace(f"path: {SAMPLE_EVALSET}", f"path: {evalset}"), encoding="utf-8")
    done = run_to_end([str(BIN / "rag-eval"), "--config", str(config), "run"], cwd=directory, env=stack["env"])
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (f"run failed (exit 2): preflight: 1 problem(s) in input: - {evalset}:2: "
                                           "field 'question': expected a string, got number")
    assert not _not_ours(done.stderr), done.stderr
    with _instance(stack) as instance:
        [failed] = [run for run in instance.get_runs() if run.status == dg.DagsterRunStatus.FAILURE]
    assert failed.job_name == INPUTS_JOB and failed.tags[EXECUTOR_TAG] == "dask"  # it failed on the cluster


def test_a_backfill_from_the_cli_runs_on_the_workers(stack):
    done = run_to_end([str(BIN / "rag-eval"), "--config", str(stack["config"]), "backfill", "--retriever", "bm25"],
                      cwd=stack["tmp"], env=stack["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    with _instance(stack) as instance:
        [backfill] = instance.get_backfills()

        def runs() -> list[dg.DagsterRun] | None:
            found = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
            return found if len(found) == 2 and all(r.is_finished for r in found) else None

        backfill_runs = wait_for(runs, "the backfill's two runs to end", stack["tmp"])
    assert {r.tags["dagster/partition"]: r.status for r in backfill_runs} == {
        "1|bm25": dg.DagsterRunStatus.SUCCESS, "2|bm25": dg.DagsterRunStatus.SUCCESS}
    _assert_every_step_ran_on_a_worker(stack, "`rag-eval backfill --retriever bm25`", backfill_runs)


def test_a_materialization_and_its_reexecution_from_graphql_run_on_the_workers(stack):
    # What the UI's Materialize sends for one partition of an asset: the implicit asset job with that asset.
    first = _launch(stack["url"], "__ASSET_JOB", {"dagster/partition": "bm25"}, ["retrieval_results"])
    assert _finished(stack, first) == "SUCCESS"
    again = graphql(stack["url"], REEXECUTE, {"parent": first})["launchRunReexecution"]
    assert again["__typename"] == "LaunchRunSuccess", again
    second = again["run"]["runId"]
    assert _finished(stack, second) == "SUCCESS"
    with _instance(stack) as instance:
        runs = [instance.get_run_by_id(first), instance.get_run_by_id(second)]
        assert [_succeeded_steps(instance, run.run_id) for run in runs] == [{"retrieval_results"}] * 2
    assert runs[1].parent_run_id == first
    _assert_every_step_ran_on_a_worker(stack, "a GraphQL materialization and its re-execution", runs)


def test_a_killed_workers_step_runs_again_on_the_other_worker(stack):
    cluster: DaskCluster = stack["cluster"]
    gate: LLMGate = stack["gate"]
    # The answers were cached by the runs above: without its cache the step asks the LLM server, which holds it.
    for cached in (stack["tmp"] / "store" / "cache").glob("llm.sqlite*"):
        cached.unlink()
    gate.armed = True
    run_id = _launch(stack["url"], ANSWER_GRID_JOB,
                     {"dagster/partition": "1|bm25", "dagster/partition/k": "1", "dagster/partition/retriever": "bm25"})
    wait_for(gate.held.is_set, "the answers step to call the LLM", stack["tmp"])
    key = f"{ANSWER_GRID_JOB}.answers.{run_id}"

    def worker_running_it() -> str | None:
        return next((address for address, keys in cluster.client.processing().items() if key in keys), None)

    address = wait_for(worker_running_it, "the scheduler to show the step's worker", stack["tmp"])
    killed = stack["names"][address]
    os.killpg(cluster.workers[killed].pid, signal.SIGKILL)
    cluster.workers[killed].wait()
    gate.release.set()

    status = _finished(stack, run_id)
    with _instance(stack) as instance:
        run = instance.get_run_by_id(run_id)
        succeeded = _succeeded_steps(instance, run_id)
        starts = [e.dagster_event for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
                  if e.dagster_event.step_key == "answers"]
        messages = [e.message or "" for e in instance.all_logs(run_id)]
    ran = _show_steps_by_worker(stack, f"the run whose worker {killed} was killed", [run])
    print(f"  ({killed} was killed while it ran answers of run {run_id[:8]}; the run ended {status})")
    if status == "SUCCESS":
        [other] = {"w1", "w2"} - {killed}
        assert "answers" in succeeded and ran == {other: {(run_id, step) for step in succeeded}}
        assert len(starts) == 2 and starts[0].pid != starts[1].pid  # started on the killed worker, then again
        assets = stack["tmp"] / "store" / "assets"
        answers = stored_table(assets, "answers/retriever=bm25/k=1")
        assert sorted(answers["query_id"]) == sorted(stored_table(assets, "evalset")["id"])
    else:
        assert status == "FAILURE" and any("KilledWorker" in m or "died" in m for m in messages), messages

