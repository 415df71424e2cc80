"""Nights as an operator runs them, through `rag-eval run` on a generated BEIR collection: the baseline stays put,
a regression stays `worse` night after night until it is accepted, re-executing the failed run changes nothing,
retention keeps what it must, and each worse or failed night posts exactly one alert to a loopback webhook: among
them two nights' runs (nightly_job, as the daemon runs the schedule's), a worse one and one whose inputs failed, on
which the failure sensor is evaluated."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.defs.automation import night_request
from rag_eval_assets.defs.night_story import pipeline_runs
from rag_eval_assets.runs.baseline import NEWEST_GOOD
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.save import RUN_DIR_MODE
from rag_eval_assets.runs.status import RunStatus, read_status
from rag_eval_assets.runs.store import COMPARISON_JSON
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.synthetic_beir import write_collection
from rag_eval_assets_tests.webhook_receiver import webhook_receiver

HOOK_ENV = "RAG_EVAL_TEST_ALERT_WEBHOOK"
CONFIG_ENV = "RAG_EVAL_CONFIG"
GOOD, BROKEN = (0.9, 0.4), (0.05, 0.0)


def _config(tmp: Path, collection: Path, bm25: tuple[float, float], evalset: Path | None = None) -> Path:
    path = tmp / "rag_eval.yaml"
    path.write_text(
        f"storage_dir: {tmp / 'store'}\n"
        f"corpus: {{id: synthetic, path: {collection}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {evalset or collection}}}\n"
        "chunking: {chunk_size_chars: 100000, overlap_chars: 0}\n"
        "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
        f"retrieval: {{level: doc, bm25: {{k1: {bm25[0]}, b: {bm25[1]}}}}}\n"
        f"alerts: {{webhook_url_env: {HOOK_ENV}, on: [worse, failed]}}\n"
        "retention: {keep_runs: 2}\n",
        encoding="utf-8",
    )
    return path


def metrics_job() -> dg.JobDefinition:
    """The metrics job of the configuration in $RAG_EVAL_CONFIG, reconstructable for Dagster's re-execution."""
    return build_defs(os.environ[CONFIG_ENV]).resolve_job_def("metrics_job")


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nights")
    collection = write_collection(tmp / "beir")
    home = tmp / "home"
    home.mkdir()
    state: dict = {"tmp": tmp, "nights": []}
    with webhook_receiver() as hook, pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        patch.setenv(HOOK_ENV, hook.url)
        runs_dir = tmp / "store" / "runs"

        def night(name: str, bm25: tuple[float, float]) -> None:
            config = _config(tmp, collection, bm25)
            before = set(list_runs(runs_dir))
            code = main(["--config", str(config), "run"])
            (new,) = [p for p in list_runs(runs_dir) if p not in before]
            comparison = json.loads((new / COMPARISON_JSON).read_text()) if (new / COMPARISON_JSON).is_file() else None
            evalset = json.loads((new / "config.json").read_text())["version_tuple"]["dataset"]["eval_set_version"]
            state["nights"].append({"name": name, "code": code, "dir": new, "comparison": comparison,
                                    "evalset": evalset, "messages": len(hook.received), "status": read_status(new)})

        night("good", GOOD)
        night("broken", BROKEN)
        night("broken again", BROKEN)
        failed_dir = state["nights"][-1]["dir"]

        # Re-execute the failed metrics run of the third night, whole and from failure, as the UI does.
        patch.setenv(CONFIG_ENV, str(tmp / "rag_eval.yaml"))
        with dg.DagsterInstance.get() as instance:
            failed = instance.get_runs(dg.RunsFilter(job_name="metrics_job", statuses=[dg.DagsterRunStatus.FAILURE]),
                                       limit=1)[0]
            job = dg.reconstructable(metrics_job)
            reexecutions = {}
            for how, options in (("whole", dg.ReexecutionOptions(parent_run_id=failed.run_id)),
                                 ("from failure", dg.ReexecutionOptions.from_failure(failed.run_id, instance))):
                with dg.execute_job(job, instance, reexecution_options=options, raise_on_error=False) as result:
                    failures = [e.step_failure_data.error for e in result.all_events if e.is_step_failure]
                    reexecutions[how] = {
                        "success": result.success,
                        "failed": [(e.step_key, _innermost(err).message) for e, err in zip(
                            [e for e in result.all_events if e.is_step_failure], failures)],
                        "materialized": sorted(e.asset_key.to_user_string()
                                               for e in result.get_asset_materialization_events()
                                               for e in [e.materialization]),
                        "run_id": result.run_id,
                        "rewritten_by": json.loads((failed_dir / "config.json").read_text())["dagster_run_id"],
                    }
            state["reexecutions"] = reexecutions
            state["after_reexecution"] = {"dirs": list_runs(runs_dir), "messages": len(hook.received),
                                          "comparison": json.loads((failed_dir / COMPARISON_JSON).read_text()),
                                          "status": read_status(failed_dir)}

            # A night's run of the broken configuration: worse again, its report's verdict alert sent; the failure
            # sensor leaves it to that alert.
            worse = _nightly_run(tmp / "rag_eval.yaml", instance, "2026-11-23")
            (worse_dir,) = [p for p in list_runs(runs_dir) if p not in state["after_reexecution"]["dirs"]]
            state["worse_night"] = {"success": worse.is_success, "dir": worse_dir, "messages": len(hook.received),
                                    "comparison": json.loads((worse_dir / COMPARISON_JSON).read_text())}
            state["worse_night_sensor"] = _failure_sensor(tmp / "rag_eval.yaml", instance, worse)
            state["messages_after_worse_sensor"] = len(hook.received)

            # A night whose evalset is malformed fails in its inputs run: one "failed" alert.
            bad = tmp / "bad_queries"
            bad.mkdir()
            (bad / "questions.jsonl").write_text('{"id": "q1", "question": 42}\n', encoding="utf-8")
            bad_config = _config(tmp / "bad_queries", collection, GOOD, evalset=bad / "questions.jsonl")
            failed_night = _nightly_run(bad_config, instance, "2026-11-24")
            state["failed_night"] = {"success": failed_night.is_success, "run_id": failed_night.run_id,
                                     "runs": [(r.job_name, r.status) for r in pipeline_runs(instance, failed_night)]}
            state["failed_night_sensor"] = _failure_sensor(bad_config, instance, failed_night)
            state["failed_night_messages"] = list(hook.received[state["messages_after_worse_sensor"]:])

        # The operator accepts the second broken night: the next broken night compares with it.
        state["accept"] = main(["--config", str(tmp / "rag_eval.yaml"), "baseline", "accept",
                                failed_dir.name, "--note", "k1 0.05 on purpose"])
        night("broken, accepted", BROKEN)
        state["hook"] = hook.url
        state["bodies"] = list(hook.received)
    return state


def _innermost(error):
    while error.cause is not None:
        error = error.cause
    return error


def _nightly_run(config: Path, instance: dg.DagsterInstance, night: str) -> dg.DagsterRun:
    """The run of `night` of the code location of `config`, as the daemon runs the schedule's request: the night's
    job, executed here with the request's tags."""
    request = night_request(night, load_settings(config))
    result = build_defs(config).resolve_job_def(request.job_name).execute_in_process(
        instance=instance, tags=request.tags, raise_on_error=False)
    return instance.get_run_by_id(result.run_id)


class _Said(logging.Handler):
    """What the sensor logged: the one line nightly_run_alert returns, saying what became of the alert."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _failure_sensor(config: Path, instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[str]:
    """nightly_failure_alert of the code location of `config` evaluated by Dagster's own sensor context on a real
    failed run; what it logged."""
    sensor = build_defs(config).get_sensor_def("nightly_failure_alert")
    failure = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records[0]
    said, logger = _Said(), logging.getLogger(f"{__name__}.{sensor.name}")
    logger.setLevel(logging.INFO)
    logger.addHandler(said)
    try:
        sensor(dg.RunFailureSensorContext(sensor_name=sensor.name, dagster_run=run, instance=instance,
                                          dagster_event=failure.event_log_entry.dagster_event, logger=logger))
    finally:
        logger.removeHandler(said)
    return said.lines


def test_a_regression_stays_worse_against_the_last_good_night(nights):
    good, broken, again, accepted = nights["nights"]
    assert [n["code"] for n in (good, broken, again)] == [0, 1, 1]
    assert good["comparison"] is None
    for n, skipped in ((broken, []), (again, [broken["dir"].name])):
        c = n["comparison"]
        assert (c["verdict"], c["base_run_id"]) == ("worse", good["dir"].name)
        assert c["baseline"]["run_id"] == good["dir"].name and c["baseline"]["policy"] == NEWEST_GOOD
        assert [s["run_id"] for s in c["baseline"]["skipped"]] == skipped
    (why,) = [s["why"] for s in again["comparison"]["baseline"]["skipped"]]
    assert why.startswith("check run_comparison:quality_gate failed: worse: bm25@1: ndcg@k delta ")
    assert broken["status"] == RunStatus("failed", broken["status"].pipeline, (why,))
    assert good["status"].state == "good"


def test_re_executing_the_failed_run_keeps_its_verdict_and_its_run_directory(nights):
    whole, from_failure = nights["reexecutions"]["whole"], nights["reexecutions"]["from failure"]
    for reexecution in (whole, from_failure):
        assert not reexecution["success"]
        (step, message), = reexecution["failed"]
        assert step == "run_comparison" and "quality_gate" in message
    # Whole: the run directory was written again, by the re-execution, in place; from failure: only the comparison.
    assert "evaluation_run" in whole["materialized"] and "evaluation_run" not in from_failure["materialized"]
    assert whole["rewritten_by"] == whole["run_id"]
    after = nights["after_reexecution"]
    assert [p.name for p in after["dirs"]] == [n["dir"].name for n in reversed(nights["nights"][:3])]
    assert (after["comparison"]["verdict"], after["comparison"]["base_run_id"]) == ("worse",
                                                                                     nights["nights"][0]["dir"].name)
    # Rewritten, and failed again: still no baseline.
    assert after["status"].state == "failed" and after["status"].reasons[0].startswith(
        "check run_comparison:quality_gate failed: worse: ")


def test_an_accepted_run_becomes_the_baseline(nights):
    again, accepted = nights["nights"][2], nights["nights"][3]
    assert nights["accept"] == 0 and (again["dir"] / "accepted.json").is_file()
    c = accepted["comparison"]
    assert (accepted["code"], c["verdict"], c["base_run_id"]) == (0, "no significant change", again["dir"].name)


def test_one_alert_per_worse_or_failed_night_and_none_for_good_ones(nights):
    good, broken, again, accepted = nights["nights"]
    assert [n["messages"] for n in (good, broken, again)] == [0, 1, 2]
    assert nights["after_reexecution"]["messages"] == 2  # re-executing did not alert again
    # The worse night's run: its report's verdict alert, one message; the failure sensor sends no second one.
    worse_night = nights["worse_night"]
    assert not worse_night["success"] and worse_night["messages"] == 3
    assert (worse_night["comparison"]["verdict"], worse_night["comparison"]["base_run_id"]) == (
        "worse", good["dir"].name)
    assert nights["bodies"][2]["text"].startswith(
        f"rag-eval: WORSE — {again['evalset']}, run {worse_night['dir'].name}")
    assert nights["worse_night_sensor"] == ["the run failed on its worse verdict, whose own alert covers it"]
    assert nights["messages_after_worse_sensor"] == 3
    # The malformed evalset's night: its inputs run failed, the night's run with it; one "failed" alert that names
    # the night's run, the pipeline run that failed and its error.
    failed_night = nights["failed_night"]
    assert not failed_night["success"] and failed_night["runs"] == [("inputs_job", dg.DagsterRunStatus.FAILURE)]
    assert nights["failed_night_sensor"] == ["sent (failed)"]
    (failed,) = nights["failed_night_messages"]
    lines = failed["text"].splitlines()
    assert lines[:4] == ["rag-eval: nightly run failure — nightly_job", "night: 2026-11-24", "job: nightly_job",
                         f"dagster run: {failed_night['run_id']}"]
    assert lines[4:] == [
        "error: inputs_job failed at step preflight: InputError: 1 problem(s) in input: - "
        f"{nights['tmp'] / 'bad_queries' / 'questions.jsonl'}:1: field 'question': expected a string, got number; "
        f"re-execute the night's run {failed_night['run_id']} in the UI (it redoes what is not committed; after an "
        "edit of rag_eval.yaml, reload the code location first), or start another night"]
    assert accepted["messages"] == 4  # the accepted night is no change: nothing more
    worse = nights["bodies"][1]
    lines = worse["text"].splitlines()
    assert lines[0] == f"rag-eval: WORSE — {again['evalset']}, run {again['dir'].name}"
    cells = {c["retriever"] + "@" + str(c["k"]): c for c in again["comparison"]["cells"]}
    assert lines[1].startswith("bm25@1: ndcg@k ") and f"[{cells['bm25@1']['ci_low']:+.3f}, " in lines[1]
    assert f"run: {again['dir'].name} against baseline {good['dir'].name}" in lines
    assert f"report: {again['dir'] / 'report.html'}" in lines
    assert worse["blocks"][0]["text"]["text"].startswith("*rag-eval: WORSE")


def test_the_webhook_url_is_never_written(nights):
    secret = nights["hook"].split("/hooks/")[1]
    for path in (nights["tmp"] / "store").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_retention_keeps_the_newest_runs_and_the_accepted_one(nights):
    good, broken, again, accepted = nights["nights"]
    remaining = [p.name for p in list_runs(nights["tmp"] / "store" / "runs")]
    # The newest two (the worse night's run among them), and the accepted one beyond them.
    assert remaining == [accepted["dir"].name, nights["worse_night"]["dir"].name, again["dir"].name]
    assert (accepted["dir"].stat().st_mode & 0o777) == RUN_DIR_MODE
