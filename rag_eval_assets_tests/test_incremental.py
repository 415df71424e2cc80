"""Incremental runs by Dagster's own stale status, through `rag-eval run` on a copy of the sample data: a re-run with
nothing changed materializes nothing, a setting re-runs only what reads it, an edited note re-encodes only its
chunks, `--force` recomputes everything, the UI (Dagster's GraphQL over the code location, as the webserver serves
it) shows the same stale state, and a run's config_hash does not depend on the order its partitions ran in."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

import rag_eval_assets.definitions
from rag_eval_assets.cli import main
from rag_eval_assets.configured_run import run_versions
from rag_eval_assets.corpus.load import corpus_sha256
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.defs.fingerprints import FINGERPRINTS
from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, GRID_JOB, INPUTS_JOB, METRICS_JOB, pipeline_stages
from rag_eval_assets.defs.staleness import Planner
from rag_eval_assets.evalset.freeze import evalset_sha256
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import SAMPLE, SAMPLE_EVALSET
from rag_eval_assets_tests.stored_tables import newest_pipeline, stored_table

NOTE = Path("notes") / "Safety.md"
DENSE = "dense_index/all-MiniLM-L6-v2"
GRID = "retrievers: [bm25, dense, hybrid]\n"
BASE = GRID + "k_values: [1, 5]\nanswering: {k_values: [5]}\n"
K_CHANGED = GRID + "k_values: [1, 3, 5]\nanswering: {k_values: [3, 5]}\n"
K1_CHANGED = K_CHANGED + "retrieval: {bm25: {k1: 1.3}}\n"
METRICS = {"retrieval_metrics_per_query", "retrieval_metrics", "answer_metrics_per_query", "answer_metrics",
           "evaluation_run", "run_comparison"}
STALE_QUERY = "{ assetNodes { assetKey { path } isPartitioned staleStatus } }"
PARTITION_QUERY = ("query ($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path } partitionKeys "
                   "staleStatusByPartition } }")


def _write_config(tmp: Path, grid: str) -> Path:
    path = tmp / "rag_eval.yaml"
    path.write_text(f"storage_dir: {tmp / 'store'}\ncorpus: {{id: sample, path: {tmp / 'corpus'}}}\n"
                    f"evalset: {{name: sample_eval_set, path: {SAMPLE_EVALSET}}}\n" + grid, encoding="utf-8")
    return path


def _run(config: Path, *options: str) -> tuple[int, dict[str, str]]:
    """rag-eval run; its exit code and its closing listing: asset[partition] -> "materialized ..." / "up to date"."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--config", str(config), "run", *options])
    listing = dict(re.findall(r"^  (\S+)\s+(materialized.*|up to date|not run.*)$", out.getvalue(), flags=re.M))
    return code, listing


def _materialized(listing: dict[str, str]) -> set[str]:
    return {name for name, state in listing.items() if state.startswith("materialized")}


def _ui_stale(config: Path, instance: dg.DagsterInstance) -> set[str]:
    """asset[partition] the webserver's GraphQL marks STALE or MISSING for the code location in $RAG_EVAL_CONFIG."""
    with define_out_of_process_context(rag_eval_assets.definitions.__file__, "defs", instance) as context:
        nodes = execute_dagster_graphql(context, STALE_QUERY).data["assetNodes"]
        stale = {"/".join(n["assetKey"]["path"]) for n in nodes
                 if not n["isPartitioned"] and n["staleStatus"] != "FRESH"}
        keys = [{"path": n["assetKey"]["path"]} for n in nodes if n["isPartitioned"]]
        for node in execute_dagster_graphql(context, PARTITION_QUERY, {"keys": keys}).data["assetNodes"]:
            name = "/".join(node["assetKey"]["path"])
            stale |= {f"{name}[{p}]" for p, status in zip(node["partitionKeys"], node["staleStatusByPartition"])
                      if status != "FRESH"}
    return stale


def _cli_stale(config: Path, instance: dg.DagsterInstance) -> set[str]:
    """asset[partition] the CLI's planner (in this process, from build_defs) finds missing or stale, fingerprints
    aside: whether a file changed is known only once it is fingerprinted, to the CLI and the UI alike."""
    settings = load_settings(config)
    planner = Planner(build_defs(config).resolve_asset_graph(), settings, instance)
    return {key.to_user_string() + (f"[{partition}]" if partition else "")
            for key, partition, why in planner.listing(pipeline_stages(settings))
            if key.to_user_string() not in FINGERPRINTS and why is not None}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("incremental")
    shutil.copytree(SAMPLE / "corpus", tmp / "corpus")
    (tmp / "home").mkdir()
    steps: dict = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(tmp / "home"))
        config = _write_config(tmp, BASE)
        patch.setenv("RAG_EVAL_CONFIG", str(config))
        steps["cold"] = _run(config)
        steps["warm"] = _run(config)
        _write_config(tmp, K_CHANGED)
        steps["k_values"] = _run(config)
        _write_config(tmp, K1_CHANGED)
        with dg.DagsterInstance.get() as instance:
            steps["ui_before_k1"] = (_ui_stale(config, instance), _cli_stale(config, instance))
        steps["k1"] = _run(config)
        with dg.DagsterInstance.get() as instance:
            steps["ui_after_k1"] = _ui_stale(config, instance)
        steps["force"] = _run(config, "--force")
        chunks_before = stored_table(tmp / "store" / "assets", "chunks")
        note = tmp / "corpus" / NOTE
        note.write_text(note.read_text(encoding="utf-8") + "\n## Lightning\n\nClose the dome when thunder is heard "
                        "within ten kilometres.\n", encoding="utf-8")
        steps["note"] = _run(config)
        # The gate refuses a baseline on another corpus, so this pipeline did not commit: read what it staged.
        chunks_after = stored_table(tmp / "store" / "assets", "chunks", newest_pipeline(tmp / "store" / "assets"))
        with dg.DagsterInstance.get() as instance:
            dense = instance.get_latest_materialization_event(
                dg.AssetKey.from_user_string(DENSE)).asset_materialization
        steps["note_encoded"] = (dense.metadata["encoded"].value, chunks_before, chunks_after)
        # The note was edited on purpose: its run, incompatible with the last good one, is accepted as the baseline.
        note_run = list_runs(tmp / "store" / "runs")[0]
        steps["accept"] = main(["--config", str(config), "baseline", "accept", note_run.name])
        steps["note_again"] = _run(config)
        steps["note_again_base"] = json.loads((list_runs(tmp / "store" / "runs")[0] / "comparison.json").read_text(
            encoding="utf-8"))["base_run_id"], note_run.name
    return steps


def test_a_rerun_with_nothing_changed_materializes_nothing_and_says_up_to_date(history):
    code, cold = history["cold"]
    assert code == 0 and "up to date" not in cold.values()
    code, warm = history["warm"]
    assert code == 0
    # inputs with their fingerprints, the retrieval grid with retriever_config, the answer grid, metrics (grades_file
    # among them)
    assert warm.keys() == cold.keys() and len(warm) == 10 + 2 * 3 + 2 * 3 + 8
    assert set(warm.values()) == {"up to date"}


def test_changing_k_values_reruns_only_answers_and_metrics(history):
    code, listing = history["k_values"]
    assert code == 0
    assert _materialized(listing) == {
        *(f"{asset}[3|{r}]" for asset in ("answers", "judged_answers") for r in ("bm25", "dense", "hybrid")),
        *METRICS,
    }
    assert listing["answers[5|bm25]"] == listing["retrieval_results[bm25]"] == "up to date"


def test_changing_bm25_k1_reruns_only_the_partitions_that_use_bm25_and_what_is_downstream(history):
    code, listing = history["k1"]
    assert code == 0
    # The bm25 index holds term counts (k1 applies at search), so no index is rebuilt and dense is untouched.
    assert _materialized(listing) == {
        *(f"{asset}[{r}]" for asset in ("retriever_config", "retrieval_results") for r in ("bm25", "hybrid")),
        *(f"{asset}[{k}|{r}]" for asset in ("answers", "judged_answers") for k in (3, 5) for r in ("bm25", "hybrid")),
        *METRICS,
    }


def test_editing_one_note_reencodes_only_its_changed_chunks(history):
    code, listing = history["note"]
    # Everything downstream of the corpus ran; the gate then refuses to compare with a baseline on another corpus.
    assert code == 1 and not [state for state in listing.values() if state.startswith("not run")]
    materialized = _materialized(listing)
    assert {"corpus_files", "corpus_documents", "chunks", DENSE, "bm25_index", "run_comparison"} <= materialized
    assert {name for name, state in listing.items() if state == "up to date"} == {
        "evalset_file", "evalset", "dev_subset", "grades_file",
        *(f"retriever_config[{r}]" for r in ("bm25", "dense", "hybrid"))}
    encoded, before, after = history["note_encoded"]
    new_texts = set(after["text"]) - set(before["text"])
    assert {Path(p) for p in after.loc[after["text"].isin(new_texts), "rel_path"]} == {NOTE}
    assert encoded == len(new_texts) > 0


def test_what_a_failed_pipeline_wrote_is_redone_not_taken_as_up_to_date(history):
    # The note's pipeline failed at its gate and committed nothing: Dagster records its materializations, but
    # readers never saw them, so the next run does them again instead of calling them up to date (its baseline is
    # now the failed run, accepted by hand, on the same corpus, so it passes and commits).
    code, listing = history["note_again"]
    assert history["accept"] == 0 and code == 0
    base, accepted = history["note_again_base"]
    assert base == accepted
    assert {"corpus_documents", "chunks", DENSE, "evaluation_run"} <= _materialized(listing)
    assert listing["evalset"] == "up to date"


def test_force_recomputes_everything(history):
    code, listing = history["force"]
    assert code == 0
    assert listing.keys() == history["warm"][1].keys() | {
        f"{a}[3|{r}]" for a in ("answers", "judged_answers") for r in ("bm25", "dense", "hybrid")}
    assert "up to date" not in listing.values()


def test_the_ui_shows_the_stale_state_the_cli_runs(history):
    ui, cli = history["ui_before_k1"]
    # The report's code versions read every setting; the bm25 partitions go stale once retriever_config records
    # the new k1 (a fingerprint: known to the CLI and the UI alike only once it is materialized).
    assert ui == cli == {"evaluation_run", "run_comparison"}
    assert history["ui_after_k1"] == set()  # after the run: nothing unsynced


def _grid_in_order(tmp: Path, retrievers: list[str], cells: list[str]) -> tuple[str, dict]:
    """The pipeline's jobs run by hand with the partitions in the given order; evaluation_run's config_hash and
    its run directory's config.json version tuple."""
    tmp.mkdir()
    config = _write_config(tmp, "retrievers: [bm25, dense]\nk_values: [1, 5]\nanswering: {k_values: [1, 5]}\n")
    shutil.copytree(SAMPLE / "corpus", tmp / "corpus")
    defs = build_defs(config)
    (tmp / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "home")) as instance:
        for job, partition in [(INPUTS_JOB, None), *((GRID_JOB, r) for r in retrievers),
                               *((ANSWER_GRID_JOB, c) for c in cells), (METRICS_JOB, None)]:
            assert defs.resolve_job_def(job).execute_in_process(instance=instance, partition_key=partition).success
        mat = instance.get_latest_materialization_event(dg.AssetKey("evaluation_run")).asset_materialization
    (run_dir,) = (tmp / "store" / "runs").iterdir()
    return mat.metadata["config_hash"].value, json.loads((run_dir / "config.json").read_text())


def test_the_config_hash_does_not_depend_on_the_partition_order(tmp_path):
    first = _grid_in_order(tmp_path / "a", ["bm25", "dense"], ["1|bm25", "1|dense", "5|bm25", "5|dense"])
    second = _grid_in_order(tmp_path / "b", ["dense", "bm25"], ["5|dense", "1|dense", "5|bm25", "1|bm25"])
    assert first[0] == second[0] == first[1]["config_hash"] == second[1]["config_hash"]
    assert first[1]["version_tuple"] == second[1]["version_tuple"]
    # A pure function of the settings and the two input hashes.
    settings = load_settings(tmp_path / "a" / "rag_eval.yaml")
    expected = run_versions(settings, evalset_sha256(SAMPLE_EVALSET), corpus_sha256(tmp_path / "a" / "corpus"))
    assert first[0] == expected.config_hash


def test_evaluate_again_into_the_same_folder_runs_nothing_and_keeps_the_first_log(tmp_path):
    args = ["evaluate", "--corpus", str(SAMPLE / "corpus"), "--evalset", str(SAMPLE_EVALSET), "--retrievers", "bm25",
            "--k", "1,5", "--out", str(tmp_path)]
    runs = tmp_path / "runs"

    def evaluate() -> tuple[dict[str, str], str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(args) == 0
        listing = dict(re.findall(r"^  (\S+)\s+(materialized.*|up to date|not run.*)$", out.getvalue(), flags=re.M))
        return listing, out.getvalue()

    first, _ = evaluate()
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    log = (run_dir / "rag-eval.log").read_text(encoding="utf-8")
    metrics = (tmp_path / "metrics.json").read_text(encoding="utf-8")
    second, printed = evaluate()
    assert "up to date" not in first.values() and set(second.values()) == {"up to date"}
    assert [p for p in runs.iterdir() if p.is_dir()] == [run_dir] and f"run directory: {run_dir}\n" in printed
    # The no-op's own log lies beside the runs; the run directory keeps the log of the run that wrote it.
    assert (run_dir / "rag-eval.log").read_text(encoding="utf-8") == log
    assert (tmp_path / "metrics.json").read_text(encoding="utf-8") == metrics
