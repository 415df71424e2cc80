"""The input assets materialized with Dagster on the shipped sample data, in a temporary DAGSTER_HOME."""

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.defs.jobs import INPUTS_JOB
from rag_eval_assets.defs.storage.table_store import CURRENT, TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.evalset.freeze import evalset_sha256
from rag_eval_assets_tests.stored_tables import stored_table

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"


def _config(tmp_path: Path, evalset: Path, name: str = "sample_eval_set") -> Path:
    path = tmp_path / "rag_eval.yaml"
    path.write_text(
        f"storage_dir: {tmp_path / 'store'}\n"
        f"corpus: {{id: sample, path: {SAMPLE / 'corpus'}}}\n"
        f"evalset: {{name: {name}, path: {evalset}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def _run(config: Path, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    job = build_defs(config).resolve_job_def(INPUTS_JOB)
    return job.execute_in_process(instance=instance, raise_on_error=False)


def _materialization(result, key: str) -> dg.AssetMaterialization:
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(key)]
    return event.materialization


def test_inputs_materialize_with_versions_and_row_counts(tmp_path, instance):
    evalset_file = SAMPLE / "evalsets" / "eval_set.jsonl"
    result = _run(_config(tmp_path, evalset_file), instance)
    assert result.success
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {
        "evalset_file", "corpus_files", "preflight", "evalset", "dev_subset", "corpus_documents", "chunks",
        "gold_labels", "bm25_index", "dense_index/all-MiniLM-L6-v2"
    }
    stored = TableStore(tmp_path / "store" / "assets").current()["tables"]
    # preflight and the file fingerprints store no table
    assert set(stored) == materialized - {"preflight", "evalset_file", "corpus_files"}

    sha = evalset_sha256(evalset_file)
    ev = _materialization(result, "evalset")
    n_questions = sum(1 for line in evalset_file.read_text(encoding="utf-8").splitlines() if line.strip())
    assert ev.metadata["dagster/row_count"].value == n_questions
    assert ev.metadata["eval_set_version"].value == f"sample_eval_set@{sha[:12]}"
    assert ev.tags["dagster/data_version"] == sha

    chunks = _materialization(result, "chunks")
    versions = chunks.metadata["version_tuple"].value
    assert versions["index"] == {"chunker_version": "chars-v1", "chunk_size_chars": 800, "overlap_chars": 100}
    assert len(versions["dataset"]["corpus_sha256"]) == 64
    stored = stored_table(tmp_path / "store" / "assets", "chunks")
    assert len(stored) == chunks.metadata["dagster/row_count"].value > 0
    assert stored["chunk_id"].is_unique

    gold = stored_table(tmp_path / "store" / "assets", "gold_labels")
    answerable = {json.loads(line)["id"] for line in evalset_file.read_text(encoding="utf-8").splitlines()
                  if line.strip() and json.loads(line).get("answerable", True) and json.loads(line).get("gold_supports")}
    assert answerable <= set(gold["query_id"])
    checks = {(e.check_name, e.passed) for e in result.get_asset_check_evaluations()}
    assert checks == {("frozen_version_unchanged", True), ("chunks_schema", True), ("gold_resolves", True)}
    assert _materialization(result, "gold_labels").metadata["unresolved_gold"].value == {
        "labels": [], "unscored_questions": []}


def test_changed_evalset_under_same_name_fails_blocking_check(tmp_path, instance):
    evalset_file = tmp_path / "eval_set.jsonl"
    shutil.copy(SAMPLE / "evalsets" / "eval_set.jsonl", evalset_file)
    config = _config(tmp_path, evalset_file)
    assert _run(config, instance).success

    lines = evalset_file.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["question"] += " (edited)"
    evalset_file.write_text("\n".join([json.dumps(record, ensure_ascii=False)] + lines[1:]) + "\n", encoding="utf-8")

    current = (tmp_path / "store" / "assets" / CURRENT).read_bytes()
    result = _run(config, instance)
    assert not result.success
    # Preflight stops the run before any input asset runs: nothing is written, not even a frozen copy (the file
    # fingerprints, which store no table, ran before it).
    assert {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} <= {
        "evalset_file", "corpus_files"}
    assert f"{evalset_file}: changed after it was frozen as sample_eval_set@" in _failure(result, "preflight")
    assert (tmp_path / "store" / "assets" / CURRENT).read_bytes() == current
    frozen = list((tmp_path / "store" / "frozen" / "sample_eval_set").glob("*/eval_set.jsonl"))
    assert [p.read_bytes() for p in frozen] == [(SAMPLE / "evalsets" / "eval_set.jsonl").read_bytes()]

    # Materialized on its own (as from the UI, without preflight), the evalset fails its blocking check before
    # its table is written.
    alone = build_defs(config).resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=[dg.AssetKey("evalset")], raise_on_error=False)
    assert not alone.success and not alone.get_asset_materialization_events()
    (check,) = alone.get_asset_check_evaluations()
    assert (check.check_name, check.passed) == ("frozen_version_unchanged", False)
    assert "give the edited file a new evalset.name" in check.description
    assert (tmp_path / "store" / "assets" / CURRENT).read_bytes() == current

    # A new version name accepts the edit.
    assert _run(_config(tmp_path, evalset_file, name="sample_eval_set_v2"), instance).success


def test_bad_evalset_fails_and_keeps_stored_tables(tmp_path, instance):
    evalset_file = tmp_path / "eval_set.jsonl"
    shutil.copy(SAMPLE / "evalsets" / "eval_set.jsonl", evalset_file)
    config = _config(tmp_path, evalset_file, name="bad")
    assert _run(config, instance).success
    before = (tmp_path / "store" / "assets" / CURRENT).read_bytes()

    evalset_file.write_text(evalset_file.read_text(encoding="utf-8") + '{"id": "broken", "question": \n',
                            encoding="utf-8")
    result = _run(config, instance)
    assert not result.success
    n_lines = len(evalset_file.read_text(encoding="utf-8").splitlines())
    assert f"{evalset_file}:{n_lines}" in _failure(result, "preflight")
    assert (tmp_path / "store" / "assets" / CURRENT).read_bytes() == before


def _failure(result: dg.ExecuteInProcessResult, step_key: str) -> str:
    failure = next(e for e in result.all_events if e.is_step_failure and e.step_key == step_key)
    error = failure.step_failure_data.error
    return error.message + (error.cause.message if error.cause else "")
