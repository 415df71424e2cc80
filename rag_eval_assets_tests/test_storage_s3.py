"""storage_dir on s3:// against a real S3-compatible server on loopback (moto's, s3_server.py), reached through the
AWS_* variables only: a run writes its tables and current.json to the bucket and a second run recomputes nothing; a
run killed midway changes no byte a reader sees; two runs that commit at the same moment serialise (the second
replaces what the first committed) and current.json never names a table of one beside a table of the other; a run
that recomputed less than another committed meanwhile fails clearly and commits nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.storage import compare_and_swap
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.defs.storage.table_store import CURRENT, STAGING, SWAP_ATTEMPTS, CommitConflict, TableStore
from rag_eval_assets_tests.s3_server import s3_server
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.waiting import run_to_end, wait_for

GRID = "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
# Other chunks: every table of the pipeline is recomputed.
RECHUNKED = GRID + "chunking: {chunk_size_chars: 500, overlap_chars: 50}\n"
PREFIX = "team/eval"
ASSETS = f"{PREFIX}/assets/"
EXIT_GUARD_S = 120.0
RAG_EVAL = Path(sys.executable).parent / "rag-eval"  # the entry point of the environment running the tests
# Two `rag-eval run` processes, each with a fault injected: its commit waits, holding the current.json it read, until
# the other's commit holds one too, so that both replace the same version at the same moment.
TOGETHER = """
import sys, time
from pathlib import Path
from rag_eval_assets.cli import main
from rag_eval_assets.defs.storage import compare_and_swap

meeting, me, other, config = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
put = compare_and_swap.put_if_unchanged

def put_together(path, text, etag):
    if path.name != "current.json":  # a pipeline's base, pinned once
        return put(path, text, etag)
    (meeting / me).touch()
    while not (meeting / other).exists():
        time.sleep(0.05)
    won = put(path, text, etag)
    with (meeting / f"{me}.attempts").open("a") as attempts:
        attempts.write(f"{etag or 'none'} {'committed' if won else 'read again'}\\n")
    return won

compare_and_swap.put_if_unchanged = put_together
sys.exit(main(["--config", config, "run"]))
"""


@pytest.fixture(scope="module")
def s3_process():
    with s3_server() as server:
        yield server


@pytest.fixture
def s3(s3_process, monkeypatch):
    """The server, with this process's environment pointing botocore at it."""
    for name, value in s3_process.env().items():
        monkeypatch.setenv(name, value)
    return s3_process


def _config(directory: Path, bucket: str, extra: str = GRID) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = write_sample_config(directory, extra)
    text = config.read_text(encoding="utf-8").replace(f"storage_dir: {directory / 'store'}",
                                                      f"storage_dir: s3://{bucket}/{PREFIX}")
    config.write_text(text, encoding="utf-8")
    return config


def _current(objects: dict[str, bytes]) -> dict:
    return json.loads(objects[ASSETS + CURRENT])


def _seen_by_readers(objects: dict[str, bytes]) -> dict[str, bytes]:
    """current.json and every table it names (current and previous), byte for byte."""
    current = _current(objects)
    files = {*current["tables"].values(), *current["previous"].values()}
    return {key: objects[key] for key in (ASSETS + CURRENT, *(ASSETS + file for file in files))}


def test_commits_on_s3_replace_the_version_they_read(s3, monkeypatch):
    """Two commits that read the same current.json: the second's conditional write fails, so it reads the first's
    and adds its own entry to it; none is lost (without the condition the second overwrote the first)."""
    base = s3.create_bucket("swap") + "/assets"
    stores = [TableStore(base), TableStore(base)]
    files = [store.write(f"entry{i}", pa.table({"i": [i]}), f"run{i}") for i, store in enumerate(stores)]
    both_read = threading.Barrier(2)
    put, outcomes = compare_and_swap.put_if_unchanged, []

    def put_together(path, text, etag):
        if len(outcomes) < 2:
            both_read.wait(timeout=60)
        outcomes.append(put(path, text, etag))
        return outcomes[-1]

    monkeypatch.setattr(compare_and_swap, "put_if_unchanged", put_together)
    threads = [threading.Thread(target=store.commit_now, args=(f"entry{i}", files[i], f"run{i}"))
               for i, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == [False, True, True]  # one lost the race once, then committed
    current = TableStore(base).current()
    assert current["generation"] == 2
    assert current["tables"] == {"entry0": files[0], "entry1": files[1]}


def test_a_write_into_a_missing_bucket_fails_and_creates_no_bucket(s3):
    """A mistyped bucket must not become a new one that the tables silently go to (a mkdir on S3 creates buckets)."""
    before = {b["Name"] for b in s3.client().list_buckets()["Buckets"]}
    with pytest.raises(FileNotFoundError):
        TableStore("s3://mistyped-bucket/team/eval/assets").write("chunks", pa.table({"i": [1]}), "run1")
    assert {b["Name"] for b in s3.client().list_buckets()["Buckets"]} == before


def test_a_commit_that_keeps_losing_the_race_fails_clearly_and_commits_nothing(s3, monkeypatch):
    base = s3.create_bucket("always-late") + "/assets"
    store = TableStore(base)
    store.commit_now("chunks", store.write("chunks", pa.table({"i": [1]}), "first"), "first")
    before = store.current()
    tried = []

    def always_late(path, text, etag):  # fault injection: another commit always wrote between this read and write
        tried.append(etag)
        return False

    monkeypatch.setattr(compare_and_swap, "put_if_unchanged", always_late)
    with pytest.raises(CommitConflict) as info:
        store.commit_now("chunks", store.write("chunks", pa.table({"i": [2]}), "second"), "second")
    assert str(info.value) == (f"{base}/{CURRENT}: replaced by {SWAP_ATTEMPTS} other commits while second was "
                               "committing; nothing of it was committed: run it again")
    assert len(tried) == SWAP_ATTEMPTS and len(set(tried)) == 1 and tried[0].startswith('"')
    assert store.current() == before


def test_a_run_on_s3_stores_its_tables_there_and_a_second_run_recomputes_nothing(s3, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    bucket = "first-run"
    s3.create_bucket(bucket)
    config = _config(tmp_path, bucket)
    assert "AWS" not in config.read_text(encoding="utf-8")

    assert main(["--config", str(config), "run"]) == 0
    assert f"tables under s3://{bucket}/{PREFIX}/assets" in capsys.readouterr().out
    objects = s3.objects(bucket)
    current = _current(objects)
    assert current["generation"] == 1 and current["previous"] == {}
    assert len(current["tables"]) >= 15  # every table of the pipeline, one commit
    assert {"chunks", "retrieval_results/retriever=bm25", "answers/retriever=bm25/k=5", "evaluation_run"} \
        <= set(current["tables"])
    assert all(ASSETS + file in objects for file in current["tables"].values())
    assert not any(key.startswith(ASSETS + STAGING) for key in objects)  # the commit dropped the staging
    chunks = s3.table(bucket, ASSETS + current["tables"]["chunks"])
    assert chunks["chunk_id"].is_unique and len(chunks) > 10
    results = s3.table(bucket, ASSETS + current["tables"]["retrieval_results/retriever=bm25"])
    assert set(results["chunk_id"]) <= set(chunks["chunk_id"])  # retrieval ran over the stored chunks
    run_dir = Path(s3.table(bucket, ASSETS + current["tables"]["evaluation_run"])["run_dir"].iloc[0])
    assert run_dir.parent == tmp_path / "data" / "runs"  # run directories stay local (docs/deployment.md)
    assert not (tmp_path / "store").exists() and not list(tmp_path.glob("s3*"))

    with dg.DagsterInstance.get() as instance:
        runs = len(instance.get_runs())
    assert main(["--config", str(config), "run"]) == 0
    assert s3.objects(bucket) == objects  # not one object written, current.json included
    with dg.DagsterInstance.get() as instance:
        assert len(instance.get_runs()) == runs  # nothing to materialize: no run launched


def test_a_run_killed_midway_changes_nothing_a_reader_sees(s3, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    bucket = "killed-run"
    s3.create_bucket(bucket)
    assert main(["--config", str(_config(tmp_path, bucket)), "run"]) == 0
    before = _seen_by_readers(s3.objects(bucket))
    staged = f"{ASSETS}{STAGING}/"

    # Other chunks: the whole pipeline runs again; it is killed once it has staged its first tables.
    config = _config(tmp_path / "rechunked", bucket, RECHUNKED)
    with (tmp_path / "killed.log").open("w") as log:
        run = subprocess.Popen([str(RAG_EVAL), "--config", str(config), "run"],
                               env=s3.env({**os.environ, "DAGSTER_HOME": str(tmp_path / "killed_home")}),
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: sum(key.endswith(".json") for key in s3.objects(bucket, staged)) >= 3,
                     "the run to stage three tables", tmp_path, running=[run])
        finally:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=EXIT_GUARD_S)
    after = s3.objects(bucket)
    assert any(key.startswith(staged) for key in after)  # it did write...
    assert _seen_by_readers(after) == before  # ...and no reader sees a byte of it
    store = TableStore(f"s3://{bucket}/{ASSETS}")
    assert store.current() == json.loads(before[ASSETS + CURRENT])
    for entry, file in store.current()["tables"].items():
        assert str(store.locate(entry)) == f"s3://{bucket}/{ASSETS}{file}"


def _run_ids(home: Path) -> dict[str, str]:
    """Dagster run id -> its pipeline tag, of the instance in `home`."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return {run.run_id: run.tags[PIPELINE_TAG] for run in instance.get_runs()}


def test_two_runs_committing_at_the_same_moment_serialise(s3, tmp_path):
    bucket = "two-runs"
    s3.create_bucket(bucket)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    runs = {}
    try:
        for me, other in (("a", "b"), ("b", "a")):
            config = _config(tmp_path / me, bucket)
            log = (tmp_path / f"{me}.log").open("w")
            runs[me] = subprocess.Popen(
                [sys.executable, "-c", TOGETHER, str(meeting), me, other, str(config)], cwd=tmp_path / me,
                env=s3.env({**os.environ, "DAGSTER_HOME": str(tmp_path / me / "home")}), stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        ended = lambda: [run.poll() for run in runs.values()]  # noqa: E731
        # Both ended, or one failed (the other may then wait for it forever).
        wait_for(lambda: None not in ended() or any(code not in (None, 0) for code in ended()), "both runs to end",
                 tmp_path)
    finally:
        for run in runs.values():
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait(timeout=EXIT_GUARD_S)
    logs = {me: (tmp_path / f"{me}.log").read_text(encoding="utf-8") for me in runs}
    assert {me: run.returncode for me, run in runs.items()} == {"a": 0, "b": 0}, logs
    # Both held the same current.json (none yet) when they wrote; one won, the other read the winner's and won next.
    attempts = {me: (meeting / f"{me}.attempts").read_text().splitlines() for me in runs}
    first, second = ("a", "b") if len(attempts["b"]) == 2 else ("b", "a")
    assert attempts[first] == ["none committed"]
    assert attempts[second][0] == "none read again"
    assert attempts[second][1].startswith('"') and attempts[second][1].endswith('" committed')  # the winner's ETag

    current = TableStore(f"s3://{bucket}/{ASSETS}").current()
    assert current["generation"] == 2  # two commits, none lost
    pipelines = {me: set(_run_ids(tmp_path / me / "home").values()) for me in runs}
    assert all(len(tags) == 1 for tags in pipelines.values())
    assert {current["pipeline"]} == pipelines[second]
    # Every table current is the second run's, and the first run's are its previous versions: no mix.
    run_of = {run_id[:8]: me for me in runs for run_id in _run_ids(tmp_path / me / "home")}
    written_by = {me: {file for file in current["tables"].values() if run_of[file.rsplit("-", 1)[-1][:8]] == me}
                  for me in runs}
    assert written_by[second] == set(current["tables"].values()) and not written_by[first]
    assert set(current["previous"]) == set(current["tables"])
    assert {run_of[file.rsplit("-", 1)[-1][:8]] for file in current["previous"].values()} == {first}
    objects = s3.objects(bucket)
    assert all(ASSETS + file in objects for file in (*current["tables"].values(), *current["previous"].values()))


def test_a_run_that_recomputed_less_than_another_committed_meanwhile_fails_clearly(s3, tmp_path, monkeypatch, capsys):
    """A run that recomputes the answers at a new k reads the tables of the first run; before it commits, another
    run with other chunks recomputes and commits everything. Its answers beside the other's chunks would mix two
    runs: it fails, says why, and commits nothing; run again, it recomputes on the other's tables."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    bucket = "partial-run"
    s3.create_bucket(bucket)
    config = _config(tmp_path, bucket)
    assert main(["--config", str(config), "run"]) == 0
    # The same configuration with a second answering k: in the same instance, only the new answers and what reads
    # them are recomputed.
    config.write_text(config.read_text(encoding="utf-8").replace("k_values: [5]", "k_values: [5, 1]"),
                      encoding="utf-8")
    other = _config(tmp_path / "other", bucket, RECHUNKED)
    other_env = s3.env({**os.environ, "DAGSTER_HOME": str(tmp_path / "other" / "home")})
    commit = TableStore.commit

    def another_run_commits_first(store, pipeline):  # fault injection: the other run ends first
        done = run_to_end([str(RAG_EVAL), "--config", str(other), "run"], cwd=tmp_path / "other", env=other_env)
        assert done.returncode == 0, done.stdout + done.stderr
        return commit(store, pipeline)

    monkeypatch.setattr(TableStore, "commit", another_run_commits_first)
    capsys.readouterr()
    assert main(["--config", str(config), "run"]) == 1
    out = capsys.readouterr().out
    store = TableStore(f"s3://{bucket}/{ASSETS}")
    current = store.current()
    pipelines = {me: set(_run_ids(home).values()) for me, home in (("me", tmp_path / "home"),
                                                                   ("other", tmp_path / "other" / "home"))}
    assert {current["pipeline"]} == pipelines["other"]
    # What readers see is the other run's, whole: not one table of the failed run beside it.
    others = {run_id[:8] for run_id in _run_ids(tmp_path / "other" / "home")}
    assert all(file.rsplit("-", 1)[-1][:8] in others for file in current["tables"].values())
    assert "answers/retriever=bm25/k=1" not in current["tables"]
    failure = next(line for line in out.splitlines() if line.startswith("run failed (exit 1): "))
    assert failure.startswith("run failed (exit 1): pipeline ")
    assert "was not committed: since it read the tables (generation 1), other commits changed " in failure
    assert "chunks" in failure and failure.endswith("Its tables beside those would mix two runs: run it again")
    run_dirs = sorted((tmp_path / "data" / "runs").iterdir())
    status = json.loads((run_dirs[-1] / "status.json").read_text(encoding="utf-8"))
    assert status["state"] == "failed" and status["reasons"] == [failure.removeprefix("run failed (exit 1): ")]

    # Run again: it reads the other run's tables, recomputes what they changed, and commits.
    monkeypatch.setattr(TableStore, "commit", commit)
    assert main(["--config", str(config), "run"]) == 0
    current = store.current()
    assert current["pipeline"] not in pipelines["other"] and "answers/retriever=bm25/k=1" in current["tables"]
    mine = {run_id[:8] for run_id in _run_ids(tmp_path / "home")}
    assert all(file.rsplit("-", 1)[-1][:8] in mine for file in current["tables"].values())
