"""The whole pipeline on the sample data through the same jobs `make run` uses, in a temporary DAGSTER_HOME."""

import json

import dagster as dg
import pytest

from rag_eval_assets.defs.jobs import GRID_JOB, run_pipeline
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.retrieval.backend_choice import choose_backend, cpu_model, decide
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table



@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    config = write_sample_config(tmp, "k_values: [1, 3, 5, 10]\n")
    defs = build_defs(config)
    (tmp / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "home")) as instance:
        steps = list(run_pipeline(defs, load_settings(config), instance))
        yield tmp / "store" / "assets", steps, defs, instance


def test_every_job_and_partition_succeeds(pipeline):
    assets, steps, _, _ = pipeline
    assert [(s.job, s.partition, s.result.success) for s in steps] == [
        ("inputs_job", None, True),
        ("retrieval_grid_job", "bm25", True),
        ("retrieval_grid_job", "dense", True),
        ("retrieval_grid_job", "hybrid", True),
        *[("answer_grid_job", f"{k}|{r}", True) for k in (5, 10) for r in ("bm25", "dense", "hybrid")],
        ("metrics_job", None, True),
    ]
    current = TableStore(assets).current()["tables"]
    assert sorted(e for e in current if e.startswith("retrieval_results/")) == [
        "retrieval_results/retriever=bm25", "retrieval_results/retriever=dense", "retrieval_results/retriever=hybrid"
    ]


def test_results_have_depth_of_largest_k_and_latency(pipeline):
    assets, _, _, _ = pipeline
    for name in ("bm25", "dense", "hybrid"):
        results = stored_table(assets, f"retrieval_results/retriever={name}")
        assert results.groupby("query_id")["rank"].max().max() == 10
        assert (results["latency_s"] > 0).all()
        assert results.groupby("query_id")["rank"].apply(lambda r: list(r) == list(range(1, len(r) + 1))).all()
    hybrid = stored_table(assets, "retrieval_results/retriever=hybrid")
    assert hybrid[["score_lexical", "score_semantic"]].notna().any().all()


def test_metric_tables_carry_chunking_and_versions(pipeline):
    assets, steps, _, _ = pipeline
    table = stored_table(assets, "retrieval_metrics")
    assert set(table["retriever"]) == {"bm25", "dense", "hybrid"}
    assert set(table["k"]) == {1, 3, 5, 10}
    assert (table["chunk_size_chars"] == 800).all() and (table["overlap_chars"] == 100).all()
    overall = table[(table["slice"] == "all") & (table["metric"] == "recall_any@k") & (table["k"] == 10)]
    assert len(overall) == 3 and (overall["value"] > 0).all()
    assert ((overall["ci_low"] <= overall["value"]) & (overall["value"] <= overall["ci_high"])).all()
    grid = [s for s in steps if s.job == GRID_JOB]

    def results(step) -> dg.AssetMaterialization:
        return next(e.materialization for e in step.result.get_asset_materialization_events()
                    if e.materialization.asset_key == dg.AssetKey("retrieval_results"))

    bm25_mat = results(grid[0])
    versions = bm25_mat.metadata["version_tuple"].value
    assert versions["retriever"]["name"] == "bm25" and versions["retriever"]["k1"] == 0.9
    assert versions["index"]["analyzer"] == "multi-script-v1"
    assert "embedding_model" not in versions["index"]  # bm25 searches no dense index
    assert results(grid[1]).metadata["version_tuple"].value["index"]["embedding_model"] == "all-MiniLM-L6-v2"
    assert len(versions["dataset"]["evalset_sha256"]) == 64


def test_backend_auto_encodes_with_the_measured_choice_and_records_why(pipeline):
    assets, steps, _, _ = pipeline
    [index] = [e.materialization for s in steps for e in s.result.get_asset_materialization_events()
               if e.materialization.asset_key == dg.AssetKey(["dense_index", "all-MiniLM-L6-v2"])]
    metadata = {name: value.value for name, value in index.metadata.items()}
    choice = metadata["backend_choice"]
    assert metadata["backend_setting"] == "auto" and metadata["backend"] == choice["backend"]
    # Measured by this build, or by an earlier one on this machine (the machine cache is shared: measured once).
    assert choice["machine"]["cpu"] == cpu_model() and choice["machine"]["model"] == "all-MiniLM-L6-v2"
    measured = {b: f for b, f in choice["backends"].items() if "seconds" in f}
    assert "torch" in measured and len(measured) >= 2  # the fast-cpu extra is installed for the tests
    assert choice["reason"].startswith(f"{choice['backend']}: ")
    # The recorded figures give the recorded backend by the rule.
    assert decide({b: f["seconds"] for b, f in measured.items()},
                  {b: f["ndcg@10_vs_torch"] for b, f in measured.items()})[0] == choice["backend"]
    # The vectors are that backend's (model_id names it), and so is the index part of the version tuple.
    model_id = measured[choice["backend"]]["model_id"]
    assert set(stored_table(assets, "dense_index/all-MiniLM-L6-v2")["model_id"]) == {model_id}
    assert metadata["embedding_model"] == model_id
    assert metadata["version_tuple"]["index"]["embedding_model"] == model_id
    # Another run on this machine takes the same backend from the cache, measuring nothing.
    again = choose_backend("all-MiniLM-L6-v2", "auto", [], lambda backend: pytest.fail("measured again"))
    assert again.from_cache and again.backend == choice["backend"]


def test_backfilling_one_retriever_leaves_the_others_untouched(pipeline):
    assets, _, defs, instance = pipeline
    before = TableStore(assets).current()["tables"]
    result = defs.resolve_job_def(GRID_JOB).execute_in_process(instance=instance, partition_key="dense")
    assert result.success
    after = TableStore(assets).current()["tables"]
    assert {entry for entry in after if after[entry] != before[entry]} == {"retrieval_results/retriever=dense"}


def test_folder_filter_reports_scope_miss_rate(tmp_path):
    config = write_sample_config(
        tmp_path, "retrievers: [bm25]\nk_values: [5]\nanswering: {k_values: [5]}\nretrieval: {folder_filter: true}\n"
    )
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        assert all(s.result.success for s in run_pipeline(build_defs(config), load_settings(config), instance))
    results = stored_table(tmp_path / "store" / "assets", "retrieval_results/retriever=bm25")
    evalset = stored_table(tmp_path / "store" / "assets", "evalset")
    folders = dict(zip(evalset["id"], evalset["folders"].map(json.loads)))
    for query_id, paths in results.groupby("query_id")["doc_id"]:
        if folders[query_id]:
            assert all(any(p.startswith(f.strip("/") + "/") for f in folders[query_id]) for p in paths)
    table = stored_table(tmp_path / "store" / "assets", "retrieval_metrics")
    scope = table[(table["metric"] == "scope_miss_rate") & (table["slice"] == "all")]
    assert len(scope) == 1 and 0.0 <= scope["value"].item() <= 1.0 and scope["n"].item() > 0


def test_a_seed_002_evalset_without_rules_has_no_weighted_score(pipeline):
    assets, _, _, _ = pipeline
    table = stored_table(assets, "answer_metrics")
    weighted = table[table["metric"] == "weighted_score"]
    # One row per answer cell, each saying why it has no value, never a default 1.0.
    assert len(weighted) == 6 and weighted["value"].isna().all()
    assert set(weighted["note"]) == {"not applicable: no question has a seed 000 rule (must_include, "
                                     "must_include_any, must_not_include, require_citation)"}
    per_query = stored_table(assets, "answer_metrics_per_query")
    assert not set(per_query["metric"]) & {"question_score", "include_rate", "safe_ok", "base_score"}
    (run_dir,) = (assets.parent / "runs").iterdir()
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "- weighted_score: not applicable: no question has a seed 000 rule" in summary
    assert "## Retrieval metrics (all questions)" in summary and "## Answer metrics (all questions)" in summary
