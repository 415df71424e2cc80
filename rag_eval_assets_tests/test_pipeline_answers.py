"""The offline answer side on a seed 003 evalset: extractive answers, JSON v2 scores, the dev gate as an asset check,
and seed 003's reproducibility fields in the run's config."""

import json

import dagster as dg

from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.sample_config import SAMPLE, write_sample_config


def test_seed003_answers_fail_the_dev_gate_and_record_reproducibility(tmp_path):
    config = write_sample_config(
        tmp_path,
        "retrievers: [bm25]\nk_values: [5]\nanswering: {k_values: [5], adapter_id: lora-7}\n",
        evalset=SAMPLE / "evalsets" / "question_v2.json",
        name="question_v2",
    )
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
    assert all(s.result.success for s in steps)
    (gate,) = [c for s in steps for c in s.result.get_asset_check_evaluations() if c.check_name == "json_v2_dev_gate"]
    # Extractive answers are sentences, not seed 003's JSON object: schema_ok fails and so does the gate.
    assert not gate.passed
    cells = gate.metadata["cells"].value
    assert cells["bm25@5"]["schema_pass_rate"] == 0.0 and cells["bm25@5"]["eval_score_avg"] == 0.0

    per_query = stored_table(tmp_path / "store" / "assets", "answer_metrics_per_query")
    schema_ok = per_query[per_query["metric"] == "json_v2_schema_ok"]
    assert len(schema_ok) == 6 and (schema_ok["value"] == 0.0).all()

    (run_dir,) = (tmp_path / "store" / "runs").iterdir()
    written = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    assert written["eval_set_version"].startswith("question_v2@") and len(written["index_version"]) == 16
    assert written["model_id"] == "extractive-v1"  # no model answers: the answerer names itself
    assert written["adapter_id"] == "lora-7"
    assert set(written) >= {"prompt_sha256", "prompt_version"}
