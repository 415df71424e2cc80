"""The nightly benchmark: one run key per night, the sensor walking a night through what is missing or stale to the
report, and a night with nothing changed running nothing."""

from datetime import datetime, timezone

import dagster as dg
import pyarrow as pa

from rag_eval_assets.defs.automation import NIGHT_TAG
from rag_eval_assets.defs.jobs import QUIET_CONSOLE
from rag_eval_assets.defs.loaded_config import CHANGED, CONFIG_TAG, RELOAD, config_sha256
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.runs.status import NOT_FINISHED, RunStatus, read_status, why_not_good
from rag_eval_assets_tests.sample_config import write_sample_config


def _start_night(defs: dg.Definitions, instance: dg.DagsterInstance, day: int) -> dg.RunRequest:
    schedule = defs.resolve_schedule_def("nightly_benchmark")
    # Closed here, as the daemon closes it: the context enters an instance of its own, and left to the garbage
    # collector that exit would run in whatever context is current then, leaving a dead instance's state storage in
    # Dagster's context variable for later tests.
    night = datetime(2026, 11, day, 2, 0, tzinfo=timezone.utc)
    with dg.build_schedule_context(instance=instance, repository_def=defs.get_repository_def(),
                                   scheduled_execution_time=night) as context:
        return schedule(context)


def test_schedule_asks_for_one_inputs_run_per_night(tmp_path):
    defs = build_defs(write_sample_config(tmp_path, "retrievers: [bm25]\n"))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first, again = _start_night(defs, instance, 22), _start_night(defs, instance, 22)
    assert first.run_key == again.run_key == "nightly-2026-11-22-inputs_job"
    assert first.tags[NIGHT_TAG] == "2026-11-22"
    assert first.tags[PIPELINE_TAG] == "nightly-2026-11-22"  # every run of the night: one pipeline
    # Nothing materialized yet: the whole inputs job, the file fingerprints first.
    assert {k.to_user_string() for k in first.asset_selection} == {
        "evalset_file", "corpus_files", "preflight", "evalset", "dev_subset", "corpus_documents", "chunks",
        "gold_labels", "bm25_index"}
    assert defs.resolve_schedule_def("nightly_benchmark").cron_schedule == "0 2 * * *"


def test_a_night_request_names_every_check_of_its_assets(tmp_path):
    # Named, not left to the launcher: the UI's "Launch all & commit tick result" sends only the checks a request names.
    defs = build_defs(write_sample_config(tmp_path, "retrievers: [bm25]\n"))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first = _start_night(defs, instance, 22)
    assert [k.to_user_string() for k in first.asset_check_keys] == [
        "chunks:chunks_schema", "evalset:frozen_version_unchanged", "gold_labels:gold_resolves"]


def _requests(defs: dg.Definitions, instance: dg.DagsterInstance) -> list[dg.RunRequest]:
    sensor = defs.resolve_sensor_def("nightly_progress")
    with dg.build_sensor_context(instance=instance, definitions=defs) as context:
        result = sensor.evaluate_tick(context)
    return list(result.run_requests or [])


def test_sensor_walks_a_night_through_what_is_missing_then_a_quiet_night_runs_nothing(tmp_path):
    config = write_sample_config(
        tmp_path, "retrievers: [bm25, dense]\nk_values: [3, 5]\nanswering: {k_values: [3, 5]}\n"
    )
    defs = build_defs(config)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        assert _requests(defs, instance) == []  # no night started yet

        def run(request: dg.RunRequest, job_name: str) -> None:
            result = defs.resolve_job_def(job_name).execute_in_process(
                instance=instance, partition_key=request.partition_key, tags=request.tags, run_config=QUIET_CONSOLE,
                asset_selection=request.asset_selection,
            )
            assert result.success

        run(_start_night(defs, instance, 22), "inputs_job")

        grid = _requests(defs, instance)
        assert [(r.job_name, r.partition_key) for r in grid] == [("retrieval_grid_job", "bm25"),
                                                                 ("retrieval_grid_job", "dense")]
        assert grid[0].run_key == "nightly-2026-11-22-retrieval_grid_job-bm25"
        assert grid[0].asset_selection == [dg.AssetKey("retriever_config"), dg.AssetKey("retrieval_results")]
        run(grid[0], "retrieval_grid_job")
        # One partition done, one never started: only the missing one is asked for again.
        assert [r.partition_key for r in _requests(defs, instance)] == ["dense"]
        run(grid[1], "retrieval_grid_job")

        answers = _requests(defs, instance)
        assert [(r.job_name, r.partition_key) for r in answers] == [
            ("answer_grid_job", key) for key in ("3|bm25", "3|dense", "5|bm25", "5|dense")
        ]
        for request in answers:
            run(request, "answer_grid_job")

        (report,) = _requests(defs, instance)
        assert (report.job_name, report.run_key) == ("metrics_job", "nightly-2026-11-22-metrics_job")
        assert report.tags[PIPELINE_TAG] == "nightly-2026-11-22"
        run(report, "metrics_job")
        store = TableStore(tmp_path / "store" / "assets")
        assert store.current()["tables"] == {}  # every stage succeeded, but nothing is current before the commit
        (run_dir,) = (tmp_path / "store" / "runs").iterdir()  # one run directory, not a baseline before the commit
        assert why_not_good(run_dir) == NOT_FINISHED
        staged = store.staged("nightly-2026-11-22")
        assert _requests(defs, instance) == []  # the night is complete: the sensor commits it
        assert store.current()["tables"] == staged and "answers/retriever=dense/k=5" in staged
        assert store.staged("nightly-2026-11-22") == {}
        assert read_status(run_dir) == RunStatus("good", "nightly-2026-11-22")  # now a baseline for later nights

        # The next night nothing changed: it fingerprints the files, nothing is stale, nothing else runs.
        quiet = _start_night(defs, instance, 23)
        assert quiet.asset_selection == [dg.AssetKey("evalset_file"), dg.AssetKey("corpus_files")]
        run(quiet, "inputs_job")
        assert _requests(defs, instance) == []
        assert len(list((tmp_path / "store" / "runs").iterdir())) == 1
        assert store.current()["tables"] == staged


def _walk_night(defs: dg.Definitions, instance: dg.DagsterInstance, day: int, before_commit=lambda: None) -> None:
    """Run a night's requests as the daemon would, through the sensor, up to its commit; `before_commit` runs after
    its report, before the sensor's tick that commits it."""
    requests = [_start_night(defs, instance, day)]
    while requests:
        for request in requests:
            assert defs.resolve_job_def(request.job_name).execute_in_process(
                instance=instance, partition_key=request.partition_key, tags=request.tags,
                run_config=QUIET_CONSOLE, asset_selection=request.asset_selection).success
        if requests[0].job_name == "metrics_job":
            before_commit()
        requests = _requests(defs, instance)


def test_a_night_that_another_commit_overtook_is_not_committed_and_says_why(tmp_path):
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\n")
    (tmp_path / "home").mkdir()
    store = TableStore(tmp_path / "store" / "assets")
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        _walk_night(build_defs(config), instance, 22)
        assert store.current()["pipeline"] == "nightly-2026-11-22"

        # A second answering k: the next night recomputes the new answers and the report, not the chunks. Before
        # the sensor commits it, a materialization from the UI makes other chunks current.
        config.write_text(config.read_text(encoding="utf-8").replace("k_values: [3]}", "k_values: [1, 3]}"),
                          encoding="utf-8")
        defs = build_defs(config)
        seen = {}

        def chunks_from_the_ui() -> None:
            store.commit_now("chunks", store.write("chunks", pa.table({"chunk_id": ["x"]}), "ui-run"), "run ui-run")
            seen.update(store.current())

        _walk_night(defs, instance, 23, chunks_from_the_ui)
        sensor = defs.resolve_sensor_def("nightly_progress")
        for _ in range(2):  # every tick says the same, and commits nothing
            with dg.build_sensor_context(instance=instance, definitions=defs) as context:
                said = sensor.evaluate_tick(context).skip_message
            assert said.startswith("night 2026-11-23 ran but was not committed: pipeline nightly-2026-11-23 was not "
                                   "committed: since it read the tables (generation 1), other commits changed chunks, "
                                   "which it did not recompute (now generation 2, last by run ui-run)")
            assert store.current() == seen
        assert "answers/retriever=bm25/k=1" not in seen["tables"]
        night = [run_dir for run_dir in (tmp_path / "store" / "runs").iterdir()
                 if read_status(run_dir).pipeline == "nightly-2026-11-23"]
        assert [read_status(run_dir).state for run_dir in night] == ["failed"]
        assert read_status(night[0]).reasons == (said.split(": ", 1)[1],)


def test_a_night_is_not_planned_from_an_edited_file_and_its_run_stops_before_any_step(tmp_path):
    """The schedule refuses a file edited since the definitions read it; a run requested from the file before the
    edit (its rag_eval/config_sha256 tag) stops before its first step, naming the change and how to reload."""
    config = write_sample_config(tmp_path, "retrievers: [bm25]\n")
    defs = build_defs(config)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        request = _start_night(defs, instance, 22)
        assert request.tags[CONFIG_TAG] == config_sha256(config)
        config.write_text(config.read_text(encoding="utf-8") + "k_values: [1, 3]\n", encoding="utf-8")
        refused = _start_night(defs, instance, 23)
        assert isinstance(refused, dg.SkipReason) and refused.skip_message.startswith(f"{CHANGED} ({config}: ")
        result = defs.resolve_job_def("inputs_job").execute_in_process(
            instance=instance, asset_selection=list(request.asset_selection), tags=request.tags,
            run_config=QUIET_CONSOLE, raise_on_error=False)
    assert not result.success and not result.get_asset_materialization_events()
    # In process the resources start once per run (a launched run's steps each start them, and fail alike).
    (failure,) = [event for event in result.all_events
                  if event.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE]
    error = failure.event_specific_data.error
    while error.cause is not None:
        error = error.cause
    assert error.cls_name == "ConfigChangedError"
    assert f"ConfigChangedError: {CHANGED} ({config}: " in error.message and RELOAD in error.message
