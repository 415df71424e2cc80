"""A night on demand, as docs/deployment.md tells an operator to start one: `rag-eval nightly --wait` on the
nightly host (deploy/nightly's instance on PostgreSQL, the code server and the daemon as the units run them). The
night is one run of nightly_job, queued by the command and taken from the queue by the daemon; one night at a time;
its op runs every stage of the pipeline with the blocking input checks, and the command follows the night to its
committed end, or to the run that failed."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from rag_eval_assets.defs.jobs import INPUTS_JOB, STAGE_SELECTIONS, pipeline_stages
from rag_eval_assets.defs.loaded_config import CONFIG_TAG, config_sha256
from rag_eval_assets.defs.night_story import NIGHT_TAG, NIGHTLY_JOB, pipeline_runs
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.nightly_host import BIN, host_services, service
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config
from rag_eval_assets_tests.waiting import run_to_end, wait_for

RUN_LIFECYCLE = (dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_STARTING, dg.DagsterEventType.RUN_START,
                 dg.DagsterEventType.RUN_SUCCESS)
QUEUED = re.compile(r"^night (\S+): run (\S+) \(nightly_job\) is in the run queue$", re.MULTILINE)


def _checks_of(run: dg.DagsterRun, instance: dg.DagsterInstance) -> dict[str, bool]:
    """check name -> passed, of every check evaluation in the run's event log."""
    records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    evaluations = [r.event_log_entry.dagster_event.event_specific_data for r in records]
    return {f"{e.asset_key.to_user_string()}:{e.check_name}": e.passed for e in evaluations}


@contextmanager
def _started(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, Path, Path]]:
    """`command` started, its stdout and stderr to files in `cwd` (the process, the files); killed on exit if it is
    still running."""
    stdout, stderr = cwd / "started.stdout", cwd / "started.stderr"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err)
    try:
        yield process, stdout, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_rag_eval_nightly_starts_a_whole_night_with_every_check_and_follows_it(tmp_path, monkeypatch):
    evalset = tmp_path / "eval_set.jsonl"
    evalset.write_text(SAMPLE_EVALSET.read_text(encoding="utf-8"), encoding="utf-8")
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [3, 5]\nanswering: {k_values: [5]}\n",
                                 evalset=evalset)
    nightly = [str(BIN / "rag-eval"), "nightly"]
    with host_services(tmp_path, monkeypatch, config) as (instance, _, daemon, env):
        # No daemon yet: the night's run waits in the queue, and the command says why while it follows it.
        with _started([*nightly, "--wait"], tmp_path, env) as (waiting, output, warnings):
            (night, night_id), = wait_for(lambda: QUEUED.findall(output.read_text(encoding="utf-8")),
                                          "the night's run queued", tmp_path, running=[waiting])
            # One night at a time: a second one is refused while the first has not ended, and nothing is queued.
            refused = run_to_end(nightly, cwd=tmp_path, env=env)
            queued = instance.get_runs(dg.RunsFilter(job_name=NIGHTLY_JOB))
            with service(daemon, env, tmp_path / "daemon.log"):
                wait_for(lambda: waiting.poll() is not None, "the night to end", tmp_path)
                done, warned = output.read_text(encoding="utf-8"), warnings.read_text(encoding="utf-8")

                # The evalset edited under its frozen name: the next night fails in its inputs, and says so.
                evalset.write_text("".join(evalset.read_text(encoding="utf-8").splitlines(True)[:-1]),
                                   encoding="utf-8")
                failed = run_to_end([*nightly, "--wait"], cwd=tmp_path, env=env, watch=tmp_path)

        night_run = instance.get_run_by_id(night_id)
        runs = pipeline_runs(instance, night_run)
        (inputs_run,) = [r for r in runs if r.job_name == INPUTS_JOB]
        evaluated = _checks_of(inputs_run, instance)
        lifecycle = [e.dagster_event.event_type for e in instance.all_logs(night_id) if e.dagster_event
                     and e.dagster_event.event_type in RUN_LIFECYCLE]
        (night2, broken_id), = QUEUED.findall(failed.stdout)
        broken = instance.get_run_by_id(broken_id)
        broken_runs = pipeline_runs(instance, broken)

    assert [r.run_id for r in queued] == [night_id]
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"error: night {night} is still running (run {night_id}): one night at a time; wait for it, or cancel " \
           "its run in the UI" in refused.stderr
    assert "warning: the daemon has not reported lately (QUEUED_RUN_COORDINATOR): the run waits in the queue" in warned

    # One run, the schedule's request for the night, queued by the command and taken from the queue by the daemon
    # (RUN_STARTING is the daemon's dequeue).
    assert night_run.job_name == NIGHTLY_JOB and lifecycle == list(RUN_LIFECYCLE)
    assert night_run.tags["dagster/run_key"] == f"nightly-{night}"
    assert {key: night_run.tags[key] for key in (NIGHT_TAG, PIPELINE_TAG, CONFIG_TAG)} == {
        NIGHT_TAG: night, PIPELINE_TAG: f"nightly-{night}", CONFIG_TAG: config_sha256(config)}

    # Nothing ran before: its op ran the whole inputs job with every check on its assets, then every partition of
    # every stage once, each run with the night's tags.
    graph = build_defs(config).resolve_asset_graph()
    inputs = {key.to_user_string() for key in STAGE_SELECTIONS[INPUTS_JOB].resolve(graph)}
    input_checks = {key.to_user_string()
                    for key in graph.get_check_keys_for_assets({dg.AssetKey(name) for name in inputs})}
    assert {key.to_user_string() for key in inputs_run.asset_selection} == inputs
    assert {"chunks:chunks_schema", "evalset:frozen_version_unchanged"} <= input_checks  # blocking
    assert evaluated == dict.fromkeys(input_checks, True)
    expected = Counter((job, key) for job, _, keys in pipeline_stages(load_settings(config)) for key in keys)
    assert Counter((r.job_name, r.tags.get("dagster/partition")) for r in runs) == expected
    assert all(r.tags[NIGHT_TAG] == night and r.tags[PIPELINE_TAG] == f"nightly-{night}" for r in runs)
    assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}

    # --wait listed each run as it finished and returned once the night's run had committed the night.
    for run in runs:
        partition = run.tags.get("dagster/partition")
        assert f"  {run.job_name}{f' [{partition}]' if partition else ''}: success (run {run.run_id})\n" in done
    assert TableStore(tmp_path / "store" / "assets").current()["pipeline"] == f"nightly-{night}"
    (run_dir,) = (tmp_path / "store" / "runs").iterdir()
    assert done.endswith(f"night {night} is complete, its tables committed; run directory {run_dir}, report "
                         f"{run_dir / REPORT_FILE}\nverdict: no baseline run yet: nothing to compare\n")
    assert waiting.returncode == 0, done

    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert (broken.job_name, broken.tags[NIGHT_TAG], broken.status) == (NIGHTLY_JOB, night2,
                                                                        dg.DagsterRunStatus.FAILURE)
    assert [(r.job_name, r.status) for r in broken_runs] == [(INPUTS_JOB, dg.DagsterRunStatus.FAILURE)]
    # The step that failed and why, with the advice that fits an error: re-execute the night's run.
    last = failed.stdout.strip().splitlines()[-1]
    assert last.startswith(f"night {night2}: inputs_job failed at step preflight: InputError: 1 problem(s) in input: "
                           f"- {evalset}: changed after it was frozen as sample_eval_set@")
    assert last.endswith(f"; re-execute the night's run {broken.run_id} in the UI (it redoes what is not committed; "
                         "after an edit of rag_eval.yaml, reload the code location first), or start another night")
    assert TableStore(tmp_path / "store" / "assets").current()["pipeline"] == f"nightly-{night}"  # still the good one
    assert list((tmp_path / "store" / "runs").iterdir()) == [run_dir]  # the failed night wrote none
