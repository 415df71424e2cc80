"""A night on demand, as docs/deployment.md tells an operator to start one: `rag-eval nightly --wait` on the
nightly host (deploy/nightly's instance on PostgreSQL, the code server and the daemon as the units run them). The
daemon takes the night's first run from the queue, the sensor carries the night on under the same night tag, the
blocking input checks run, and the command follows the night to its committed end, or to the run that failed."""

from __future__ import annotations

import re
from collections import Counter

import dagster as dg

from rag_eval_assets.defs.night_story import NIGHT_TAG
from rag_eval_assets.defs.jobs import INPUTS_JOB, STAGE_SELECTIONS, pipeline_stages
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.nightly_host import BIN, dagster_cli, host_services, night_runs, service
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config
from rag_eval_assets_tests.waiting import run_to_end

RUN_LIFECYCLE = (dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_STARTING, dg.DagsterEventType.RUN_START,
                 dg.DagsterEventType.RUN_SUCCESS)
QUEUED = re.compile(r"^night (\S+): run (\S+) \(inputs_job: (.+)\) is in the run queue$", re.MULTILINE)


def _checks_of(run: dg.DagsterRun, instance: dg.DagsterInstance) -> dict[str, bool]:
    """check name -> passed, of every check evaluation in the run's event log."""
    records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    evaluations = [r.event_log_entry.dagster_event.event_specific_data for r in records]
    return {f"{e.asset_key.to_user_string()}:{e.check_name}": e.passed for e in evaluations}


def test_rag_eval_nightly_starts_a_whole_night_with_every_check_and_follows_it(tmp_path, monkeypatch):
    evalset = tmp_path / "eval_set.jsonl"
    evalset.write_text(SAMPLE_EVALSET.read_text(encoding="utf-8"), encoding="utf-8")
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [3, 5]\nanswering: {k_values: [5]}\n",
                                 evalset=evalset)
    nightly = [str(BIN / "rag-eval"), "nightly"]
    with host_services(tmp_path, monkeypatch, config) as (instance, _, daemon, env):
        # The sensor is what carries a night on: with it stopped, no night starts.
        refused = run_to_end(nightly, cwd=tmp_path, env=env)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert "the nightly_progress sensor is not running" in refused.stderr
        assert not instance.get_runs()

        dagster_cli(env, "sensor", "start", "nightly_progress")
        with service(daemon, env, tmp_path / "daemon.log"):
            done = run_to_end([*nightly, "--wait"], cwd=tmp_path, env=env, watch=tmp_path)
            assert done.returncode == 0, done.stdout + done.stderr
            (night, first_id, assets), = QUEUED.findall(done.stdout)

            # The evalset edited under its frozen name: the next night fails in its inputs, and says so.
            evalset.write_text("".join(evalset.read_text(encoding="utf-8").splitlines(True)[:-1]),
                               encoding="utf-8")
            failed = run_to_end([*nightly, "--wait"], cwd=tmp_path, env=env, watch=tmp_path)

            defs = build_defs(config)
            runs = night_runs(instance, night)
            first = instance.get_run_by_id(first_id)
            evaluated = _checks_of(first, instance)
            lifecycle = [e.dagster_event.event_type for e in instance.all_logs(first_id) if e.dagster_event
                         and e.dagster_event.event_type in RUN_LIFECYCLE]
            (broken,) = [r for r in instance.get_runs() if r.tags.get(NIGHT_TAG) not in (None, night)]

    graph = defs.resolve_asset_graph()
    inputs = {key.to_user_string() for key in STAGE_SELECTIONS[INPUTS_JOB].resolve(graph)}
    input_checks = {key.to_user_string()
                    for key in graph.get_check_keys_for_assets({dg.AssetKey(name) for name in inputs})}
    # Nothing ran before: the whole inputs job, with every check on its assets, taken from the queue by the daemon.
    assert first.job_name == INPUTS_JOB and set(assets.split(", ")) == inputs
    assert {key.to_user_string() for key in first.asset_check_selection} == input_checks
    assert {"chunks:chunks_schema", "evalset:frozen_version_unchanged"} <= input_checks  # blocking
    # Queued by the command, then taken from the queue by the daemon (RUN_STARTING is the daemon's dequeue).
    assert lifecycle == list(RUN_LIFECYCLE)
    assert first.tags["dagster/run_key"] == f"nightly-{night}-inputs_job"
    assert evaluated == dict.fromkeys(input_checks, True)

    # The sensor carried the night on, every partition once, each run with the night's tags.
    expected = Counter((job, key) for job, _, keys in pipeline_stages(load_settings(config)) for key in keys)
    assert Counter((r.job_name, r.tags.get("dagster/partition")) for r in runs) == expected
    assert all(r.tags[NIGHT_TAG] == night and r.tags[PIPELINE_TAG] == f"nightly-{night}" for r in runs)
    assert {r.tags.get("dagster/sensor_name") for r in runs if r.run_id != first_id} == {"nightly_progress"}
    assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}

    # --wait listed each run as it finished and returned once the sensor had committed the night.
    assert all(f"(run {r.run_id})" in done.stdout for r in runs)
    assert TableStore(tmp_path / "store" / "assets").current()["pipeline"] == f"nightly-{night}"
    (run_dir,) = (tmp_path / "store" / "runs").iterdir()
    assert f"night {night} is complete, its tables committed; run directory {run_dir}, report " \
           f"{run_dir / REPORT_FILE}\nverdict: no baseline run yet: nothing to compare\n" in done.stdout

    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert broken.job_name == INPUTS_JOB and broken.status == dg.DagsterRunStatus.FAILURE
    night2 = broken.tags[NIGHT_TAG]
    # The step that failed and why, with the advice that fits an error: re-execute it.
    assert failed.stdout.strip().splitlines()[-1].startswith(
        f"night {night2}: inputs_job failed at step preflight: InputError: 1 problem(s) in input: - {evalset}: "
        "changed after it was frozen as sample_eval_set@")
    assert failed.stdout.strip().endswith("; re-execute it in the UI and the sensor carries the night on")
    assert TableStore(tmp_path / "store" / "assets").current()["pipeline"] == f"nightly-{night}"  # still the good one
    assert list((tmp_path / "store" / "runs").iterdir()) == [run_dir]  # the failed night wrote none
