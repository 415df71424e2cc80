"""`sweep:` grids: expanded into readable named variants beside `retrievers:`, capped by sweep_max_variants, listed by
`rag-eval run --dry-run` without starting anything, and incremental: a second run after adding a value to the grid
materializes only the new variants' partitions (and a new chunking's chunks, gold labels and index)."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import dagster as dg
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.jobs import GRID_JOB, INPUTS_JOB
from rag_eval_assets.errors import InputError
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.dagster_server import BIN, dagster_env
from rag_eval_assets_tests.dask_cluster import dask_cluster, steps_by_worker
from rag_eval_assets_tests.sample_config import REPO, write_sample_config
from rag_eval_assets_tests.waiting import run_to_end

GRID = ("sweep: {kind: bm25, k1: [0.6, 0.9, 1.2], b: [0.3, 0.5, 0.75],\n"
        "        chunking: [{chunk_size_chars: 400}, {chunk_size_chars: 800}]}\n")
SMALL_GRID = "k_values: [1, 5]\nanswering: {{k_values: [5]}}\nsweep: {{kind: bm25, k1: [{k1}], chunking: [{chunkings}]}}\n"


def test_a_grid_expands_into_the_product_of_its_values_with_readable_names(tmp_path):
    s = load_settings(write_sample_config(tmp_path, GRID))
    assert len(s.variants) == 18
    assert s.retrievers[:3] == ("bm25_k1-0.6_b-0.3_c400", "bm25_k1-0.6_b-0.3_c800", "bm25_k1-0.6_b-0.5_c400")
    variant = s.variants["bm25_k1-1.2_b-0.75_c400"]
    assert (variant.kind, variant.params.k1, variant.params.b) == ("bm25", 1.2, 0.75)
    assert variant.version()["chunking"] == {"chunk_size_chars": 400, "overlap_chars": 100}
    # 800 is the top-level chunking's size: those nine variants search the top-level chunks.
    assert list(s.chunk_sets) == ["400-100"]
    assert s.variants["bm25_k1-0.6_b-0.3_c800"].chunk_set is None


def test_a_sweep_joins_the_retrievers_written_and_a_list_valued_parameter_is_fixed_as_a_list_of_one(tmp_path):
    s = load_settings(write_sample_config(tmp_path, (
        "retrievers: [bm25, dense]\n"
        "sweep:\n"
        "  - {kind: hybrid, name: rrf, of: [[bm25, dense]], rrf_k: [10, 60]}\n"
        "  - {kind: bm25, name: tight, b: [0.2], chunking: [{chunk_size_chars: 300, overlap_chars: 0},\n"
        "                                                   {chunk_size_chars: 300, overlap_chars: 60}]}\n")))
    assert s.retrievers == ("bm25", "dense", "rrf_rrf_k-10", "rrf_rrf_k-60", "tight_b-0.2_c300-0",
                            "tight_b-0.2_c300-60")
    assert [p.name for p in s.variants["rrf_rrf_k-10"].parts] == ["bm25", "dense"]
    assert list(s.chunk_sets) == ["300-0", "300-60"]


def test_a_grid_larger_than_the_cap_is_a_load_error_naming_the_count_and_the_setting(tmp_path):
    with pytest.raises(InputError) as caught:
        load_settings(write_sample_config(tmp_path, GRID + "sweep_max_variants: 10\n"))
    assert "field 'sweep': expands to 18 variants, more than sweep_max_variants (10)" in str(caught.value)
    assert len(load_settings(write_sample_config(tmp_path, GRID + "sweep_max_variants: 18\n")).variants) == 18


def test_a_generated_name_a_written_retriever_has_is_an_error_naming_both(tmp_path):
    with pytest.raises(InputError) as caught:
        load_settings(write_sample_config(tmp_path, "retrievers: {bm25_k1-0.6: {kind: bm25}}\n"
                                                    "sweep: {kind: bm25, k1: [0.6, 0.9]}\n"))
    assert "field 'sweep': generates 'bm25_k1-0.6', a name retrievers.bm25_k1-0.6 already has" in str(caught.value)
    with pytest.raises(InputError) as caught:
        load_settings(write_sample_config(tmp_path, "sweep: {kind: bm25, k1: [-1, 0.9], b: []}\n"))
    assert "field 'sweep.b': lists no value to sweep" in str(caught.value)


def test_dry_run_lists_the_variants_and_what_they_build_and_starts_nothing(tmp_path):
    config = write_sample_config(tmp_path, GRID)
    done = subprocess.run([sys.executable, "-m", "rag_eval_assets.cli", "--config", str(config), "run", "--dry-run"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.match(r"variant\s+kind\s+chunking\s+parameters$", lines[0])
    assert re.match(r"bm25_k1-0.6_b-0.3_c400\s+bm25\s+400-100\s+k1=0.6 b=0.3 variant=lucene$", lines[1])
    assert ("18 variants: 2 chunkings, 2 indexes, 18 retrieval partitions, 36 answer partitions "
            "(18 retrievers x 2 k)") in lines
    assert "indexes: bm25_index, bm25_index/400-100" in lines
    assert not (tmp_path / "store").exists() and not (tmp_path / ".dagster_home").exists()


def _run(config) -> set[str]:
    """rag-eval run; the asset partitions it materialized."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--config", str(config), "run"]) == 0, out.getvalue()
    return {name for name, state in re.findall(r"^  (\S+)\s+(materialized.*|up to date|not run.*)$",
                                                 out.getvalue(), flags=re.M) if state.startswith("materialized")}


def test_adding_a_value_to_a_grid_runs_only_the_new_variants(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    chunkings = "{chunk_size_chars: 400}"
    config = write_sample_config(tmp_path, SMALL_GRID.format(k1="0.6, 0.9", chunkings=chunkings))
    first = _run(config)
    assert {"chunks/400-100", "bm25_index/400-100", "retrieval_results[bm25_k1-0.6_c400]"} <= first

    write_sample_config(tmp_path, SMALL_GRID.format(k1="0.6, 0.9, 1.2", chunkings=chunkings))
    metrics = {"retrieval_metrics_per_query", "retrieval_metrics", "answer_metrics_per_query", "answer_metrics",
               "evaluation_run", "run_comparison"}
    grid = {a for a in _run(config) if "[" in a}
    assert grid == {"retriever_config[bm25_k1-1.2_c400]", "retrieval_results[bm25_k1-1.2_c400]",
                    "answers[5|bm25_k1-1.2_c400]", "judged_answers[5|bm25_k1-1.2_c400]"}

    write_sample_config(tmp_path, SMALL_GRID.format(k1="0.6, 0.9, 1.2", chunkings=chunkings + ", {chunk_size_chars: 300}"))
    added = _run(config)
    new = {f"bm25_k1-{k1}_c300" for k1 in ("0.6", "0.9", "1.2")}
    assert {a for a in added if "[" in a} == {f"{asset}[{part}]" for name in new for asset, part in (
        ("retriever_config", name), ("retrieval_results", name), ("answers", f"5|{name}"),
        ("judged_answers", f"5|{name}"))}
    # The new chunking's inputs and index, once; nothing of the others is built again.
    assert {a for a in added if "[" not in a} - metrics == {"preflight", "chunks/300-100", "gold_labels/300-100",
                                                            "bm25_index/300-100"}


def test_a_sweeps_partitions_and_its_chunkings_run_on_the_dask_cluster(tmp_path):
    """execution.dask: every variant's retrieval partition, and the new chunking's chunks and index, are steps the
    cluster's workers ran (read from the scheduler's task stream)."""
    config = write_sample_config(tmp_path, SMALL_GRID.format(k1="0.6, 0.9", chunkings="{chunk_size_chars: 400}")
                                 + "execution: {dask: {address_env: RAG_EVAL_DASK}}\n")
    env = dagster_env(tmp_path / "home", config)
    with dask_cluster(tmp_path / "dask", env) as cluster:
        env["RAG_EVAL_DASK"] = cluster.address
        done = run_to_end([str(BIN / "rag-eval"), "--config", str(config), "run"], cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        ran = steps_by_worker(cluster, cluster.worker_names())
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        runs = {run.run_id: run for run in instance.get_runs()}
    on_workers = {(runs[run_id].job_name, runs[run_id].tags.get("dagster/partition"), step)
                  for steps in ran.values() for _, step, run_id in steps}
    assert {(GRID_JOB, name, "retrieval_results") for name in ("bm25_k1-0.6_c400", "bm25_k1-0.9_c400")} <= on_workers
    assert {(INPUTS_JOB, None, "chunks__400_100"), (INPUTS_JOB, None, "bm25_index__400_100")} <= on_workers
