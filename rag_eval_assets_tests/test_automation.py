"""The nightly benchmark: one run key per night, the night's run materializing what is missing or stale stage by
stage to the report and committing it, and a night with nothing changed running nothing."""

import os
import re
import socket
from datetime import datetime, timezone

import dagster as dg
import pyarrow as pa

from rag_eval_assets.defs import jobs
from rag_eval_assets.defs.loaded_config import CHANGED, CONFIG_TAG, RELOAD, config_sha256
from rag_eval_assets.defs.night_story import NIGHT_TAG, NIGHTLY_JOB, night_failure, pipeline_runs
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.runs.status import RunStatus, read_status
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config


def _start_night(defs: dg.Definitions, instance: dg.DagsterInstance, day: int) -> dg.RunRequest:
    schedule = defs.resolve_schedule_def("nightly_benchmark")
    # Closed here, as the daemon closes it: the context enters an instance of its own, and left to the garbage
    # collector that exit would run in whatever context is current then, leaving a dead instance's state storage in
    # Dagster's context variable for later tests.
    night = datetime(2026, 11, day, 2, 0, tzinfo=timezone.utc)
    with dg.build_schedule_context(instance=instance, repository_def=defs.get_repository_def(),
                                   scheduled_execution_time=night) as context:
        return schedule(context)


def _night(defs: dg.Definitions, instance: dg.DagsterInstance, day: int) -> dg.ExecuteInProcessResult:
    """The night of `day` as the daemon runs the schedule's request: its run, executed here."""
    request = _start_night(defs, instance, day)
    return defs.resolve_job_def(request.job_name).execute_in_process(instance=instance, tags=request.tags,
                                                                      raise_on_error=False)


def test_schedule_asks_for_one_run_per_night(tmp_path):
    config = write_sample_config(tmp_path, "retrievers: [bm25]\n")
    defs = build_defs(config)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first, again = _start_night(defs, instance, 22), _start_night(defs, instance, 22)
    assert first.run_key == again.run_key == "nightly-2026-11-22"
    assert first.job_name == NIGHTLY_JOB
    assert first.tags == {NIGHT_TAG: "2026-11-22", PIPELINE_TAG: "nightly-2026-11-22",
                          CONFIG_TAG: config_sha256(config)}
    assert defs.resolve_schedule_def("nightly_benchmark").cron_schedule == "0 2 * * *"


def test_a_night_runs_what_is_missing_stage_by_stage_then_a_quiet_night_runs_nothing(tmp_path):
    config = write_sample_config(
        tmp_path, "retrievers: [bm25, dense]\nk_values: [3, 5]\nanswering: {k_values: [3, 5]}\n"
    )
    defs = build_defs(config)
    (tmp_path / "home").mkdir()
    store = TableStore(tmp_path / "store" / "assets")
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        night = _night(defs, instance, 22)
        assert night.success
        runs = pipeline_runs(instance, instance.get_run_by_id(night.run_id))
        # Oldest first: each stage once the one before has succeeded, every check of the selected assets run.
        assert [(r.job_name, r.tags.get("dagster/partition")) for r in reversed(runs)] == [
            ("inputs_job", None), ("retrieval_grid_job", "bm25"), ("retrieval_grid_job", "dense"),
            *[("answer_grid_job", key) for key in ("3|bm25", "3|dense", "5|bm25", "5|dense")], ("metrics_job", None)]
        assert {r.tags[NIGHT_TAG] for r in runs} == {"2026-11-22"} and all(r.is_success for r in runs)
        inputs = runs[-1]
        checks = {e.dagster_event.event_specific_data.check_name
                  for e in instance.all_logs(inputs.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)}
        assert checks == {"chunks_schema", "frozen_version_unchanged", "gold_resolves"}
        staged = store.current()["tables"]
        assert store.current()["pipeline"] == "nightly-2026-11-22" and "answers/retriever=dense/k=5" in staged
        assert store.staged("nightly-2026-11-22") == {}
        (run_dir,) = (tmp_path / "store" / "runs").iterdir()
        assert read_status(run_dir) == RunStatus("good", "nightly-2026-11-22")  # a baseline for later nights

        # The next night nothing changed: nothing is stale, nothing runs, and it succeeds.
        quiet = _night(defs, instance, 23)
        assert quiet.success
        assert pipeline_runs(instance, instance.get_run_by_id(quiet.run_id)) == []
        assert len(list((tmp_path / "store" / "runs").iterdir())) == 1
        assert store.current()["tables"] == staged


def test_a_night_that_another_commit_overtook_is_not_committed_and_says_why(tmp_path, monkeypatch):
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\n")
    (tmp_path / "home").mkdir()
    store = TableStore(tmp_path / "store" / "assets")
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        assert _night(build_defs(config), instance, 22).success
        assert store.current()["pipeline"] == "nightly-2026-11-22"

        # A second answering k: the next night recomputes the new answers and the report, not the chunks. Between
        # its report and its commit (the fault injected), a materialization from the UI makes other chunks current.
        config.write_text(config.read_text(encoding="utf-8").replace("k_values: [3]}", "k_values: [1, 3]}"),
                          encoding="utf-8")
        seen = {}
        commit = jobs.commit_pipeline

        def chunks_from_the_ui_first(settings, pipeline):
            store.commit_now("chunks", store.write("chunks", pa.table({"chunk_id": ["x"]}), "ui-run"), "run ui-run")
            seen.update(store.current())
            return commit(settings, pipeline)

        monkeypatch.setattr(jobs, "commit_pipeline", chunks_from_the_ui_first)
        night = _night(build_defs(config), instance, 23)
        assert not night.success
        said, code = night_failure(load_settings(config), instance, instance.get_run_by_id(night.run_id))
        assert code == 1
        assert said.startswith("nightly_job failed at step night: Failure: night 2026-11-23 ran but was not "
                               "committed: pipeline nightly-2026-11-23 was not committed: since it read the tables "
                               "(generation 1), other commits changed chunks, which it did not recompute (now "
                               "generation 2, last by run ui-run)")
        assert store.current() == seen
        assert "answers/retriever=bm25/k=1" not in seen["tables"]
        night_dirs = [run_dir for run_dir in (tmp_path / "store" / "runs").iterdir()
                      if read_status(run_dir).pipeline == "nightly-2026-11-23"]
        assert [read_status(run_dir).state for run_dir in night_dirs] == ["failed"]
        assert read_status(night_dirs[0]).reasons[0].startswith("pipeline nightly-2026-11-23 was not committed")


def test_a_night_is_not_requested_from_an_edited_file_and_its_run_stops_before_any_step(tmp_path):
    """The schedule refuses a file edited since the definitions read it; a night requested from the file before the
    edit (its rag_eval/config_sha256 tag) stops before its first run, naming the change and how to reload."""
    config = write_sample_config(tmp_path, "retrievers: [bm25]\n")
    defs, settings = build_defs(config), load_settings(config)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        request = _start_night(defs, instance, 22)
        assert request.tags[CONFIG_TAG] == config_sha256(config)
        config.write_text(config.read_text(encoding="utf-8") + "k_values: [1, 3]\n", encoding="utf-8")
        refused = _start_night(defs, instance, 23)
        assert isinstance(refused, dg.SkipReason) and refused.skip_message.startswith(f"{CHANGED} ({config}: ")
        result = defs.resolve_job_def(NIGHTLY_JOB).execute_in_process(
            instance=instance, tags=request.tags, raise_on_error=False)
        assert not result.success
        night_run = instance.get_run_by_id(result.run_id)
        assert pipeline_runs(instance, night_run) == []  # stopped before any run of the pipeline
        said, code = night_failure(settings, instance, night_run)
    assert code == 2 and said.startswith(f"{CHANGED} ({config}: ") and said.endswith(RELOAD)
    assert not any(event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION for event in result.all_events)


def nightly_job_of_config() -> dg.JobDefinition:
    """The night's job of the configuration in $RAG_EVAL_CONFIG, reconstructable for Dagster's re-execution (the
    code location as it is when the re-execution is made: reloaded)."""
    return build_defs(os.environ["RAG_EVAL_CONFIG"]).resolve_job_def(NIGHTLY_JOB)


def test_a_failed_night_re_executed_after_the_file_is_fixed_and_reloaded_redoes_it_in_a_pipeline_of_its_own(
        tmp_path, monkeypatch):
    """A night launched without a night's tag (the UI's Launchpad) is a night started now; one that failed on its
    evalset, re-executed once rag_eval.yaml is fixed and the code location reloaded, runs the fixed file (its
    parent's planned-from tag notwithstanding) in a pipeline of its own, and commits."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "question": 42}\n', encoding="utf-8")
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\n",
                                 evalset=bad)
    monkeypatch.setenv("RAG_EVAL_CONFIG", str(config))
    (tmp_path / "home").mkdir()
    store = TableStore(tmp_path / "store" / "assets")
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        failed = build_defs(config).resolve_job_def(NIGHTLY_JOB).execute_in_process(
            instance=instance, raise_on_error=False, tags={CONFIG_TAG: config_sha256(config)})
        assert not failed.success
        parent = instance.get_run_by_id(failed.run_id)
        night = parent.tags[NIGHT_TAG]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d{6}Z", night) and parent.tags[PIPELINE_TAG] == f"nightly-{night}"
        said, code = night_failure(load_settings(config), instance, parent)
        assert code == 1 and said.startswith("inputs_job failed at step preflight: InputError: ")
        assert said.endswith(f"; re-execute the night's run {parent.run_id} in the UI (it redoes what is not "
                             "committed; after an edit of rag_eval.yaml, reload the code location first), or start "
                             "another night")

        config.write_text(config.read_text(encoding="utf-8").replace(str(bad), str(SAMPLE_EVALSET)),
                          encoding="utf-8")
        # With the parent's tags, as the UI's Re-execute copies them: its planned-from sha256 among them.
        copied = {key: value for key, value in parent.tags.items() if not key.startswith("dagster/")}
        assert copied[CONFIG_TAG] != config_sha256(config)
        with dg.execute_job(dg.reconstructable(nightly_job_of_config), instance, raise_on_error=False, tags=copied,
                            reexecution_options=dg.ReexecutionOptions(parent_run_id=parent.run_id)) as again:
            assert again.success
            rerun = instance.get_run_by_id(again.run_id)
        pipeline = f"nightly-{night}-{rerun.run_id[:8]}"
        assert rerun.tags[NIGHT_TAG] == night and rerun.tags[PIPELINE_TAG] == pipeline
        assert rerun.tags[CONFIG_TAG] == config_sha256(config)  # the file it ran, not its parent's
        assert [r.job_name for r in reversed(pipeline_runs(instance, rerun))] == [
            "inputs_job", "retrieval_grid_job", "answer_grid_job", "metrics_job"]
        assert store.current()["pipeline"] == pipeline
        (run_dir,) = (tmp_path / "store" / "runs").iterdir()
        assert read_status(run_dir) == RunStatus("good", pipeline)


def test_a_scheduled_night_whose_cluster_does_not_answer_stops_before_any_run_with_one_line(tmp_path):
    """The 02:00 night has no command line to check the cluster before it is queued: its run checks it first."""
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    config = write_sample_config(tmp_path, f"retrievers: [bm25]\nexecution: {{dask: {{address: '{address}', "
                                           "connect_timeout_s: 2}}\n")
    defs, settings = build_defs(config), load_settings(config)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        night = _night(defs, instance, 22)
        assert not night.success
        night_run = instance.get_run_by_id(night.run_id)
        assert pipeline_runs(instance, night_run) == []
        said, code = night_failure(settings, instance, night_run)
    assert (said, code) == (f"execution.dask.address: the dask scheduler at {address} did not answer within 2 s "
                            "(execution.dask.connect_timeout_s)", 2)
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.parquet"))
