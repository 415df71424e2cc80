"""The pipeline with a real LLM endpoint (llama.cpp serving SmolLM2-135M on loopback): LLM answers, judgments and
generated queries go through the Dagster assets, every call is recorded, and the API key reaches no artifact.

The tiny model proves the plumbing, not judgement quality: a reply may fail validation, and then it must be an
explicit error row, never a silent gap.
"""

import json
import re

import dagster as dg
import pytest

from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.llama_server import SMOLLM2_ALIAS, running_smollm2
from rag_eval_assets_tests.sample_config import SAMPLE, write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table

SECRET = "sk-test-7f3a9c-never-store-me"


@pytest.fixture(scope="module")
def server_url():
    with running_smollm2() as url:
        yield url


def test_llm_answers_judgments_and_generated_queries(tmp_path, server_url, monkeypatch):
    lines = (SAMPLE / "evalsets" / "eval_set.jsonl").read_text(encoding="utf-8").splitlines()[:1]
    evalset = tmp_path / "eval_set.jsonl"
    evalset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("RAG_EVAL_TEST_KEY", SECRET)
    config = write_sample_config(
        tmp_path,
        "retrievers: [bm25]\nk_values: [3]\n"
        "answering: {answerer: llm, k_values: [3]}\n"
        "query_generation: {n_chunks: 1, seed: 0}\n"
        # SmolLM2-135M proves the plumbing, not judgement: its structured replies often fail their schema, so this
        # run accepts any error rate (test_llm_outages.py shows call_health failing a run).
        f"llm: {{base_url: '{server_url}', model: {SMOLLM2_ALIAS}, api_key_env: RAG_EVAL_TEST_KEY, max_tokens: 64, "
        "max_error_rate: 1.0}\n",
        evalset=evalset,
        name="one",
    )
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
        assert [s.job for s in steps if not s.result.success] == []
        metadata_text = json.dumps(
            [str(e.materialization.metadata) for s in steps for e in s.result.get_asset_materialization_events()]
        )
        logs = json.dumps([str(entry) for s in steps for entry in instance.all_logs(s.result.run_id)])

    store = tmp_path / "store"
    answers = stored_table(store / "assets", "answers/retriever=bm25/k=3")
    assert len(answers) == 1 and set(answers["answerer"]) == {"llm"}
    for row in answers.itertuples():
        # A parsed reply has tokens and a model; a failed one says why. Nothing is silently empty.
        assert (row.error is None and row.prompt_tokens > 0 and row.model == SMOLLM2_ALIAS) or isinstance(row.error, str)
    judged = stored_table(store / "assets", "judged_answers/retriever=bm25/k=3")
    assert sorted(judged["judge"].unique()) == ["correctness", "groundedness"] and len(judged) == 2
    assert (judged["score"].notna() | judged["error"].notna()).all()
    assert set(judged["judge_model"]) == {SMOLLM2_ALIAS} and set(judged["temperature"]) == {0.0}

    table = stored_table(store / "assets", "answer_metrics")
    # With an endpoint an LLM metric is computed, or says which of its calls failed: never "no endpoint".
    # ("not applicable" notes are about the evalset: this question has no seed 000 rule to weigh a score by.)
    notes = [n for n in table["note"].dropna() if not n.startswith("not applicable: ")]
    assert all(re.match(r"not computed: (\d+ of \d+ calls failed|no row was sent) \(", n) for n in notes), notes
    generated = stored_table(store / "assets", "generated_queries")
    generated_file = store / "generated" / "generated_queries.jsonl"
    assert generated_file.is_file() and len(generated) == len(generated_file.read_text().splitlines())

    (run_dir,) = (store / "runs").iterdir()
    config_json = json.loads((run_dir / "config.json").read_text())
    assert config_json["version_tuple"]["judge"] == {"model": SMOLLM2_ALIAS, "prompt_version": "v1", "temperature": 0.0}
    artifacts = [p.read_text(encoding="utf-8", errors="replace") for p in store.rglob("*") if p.is_file()
                 and p.suffix in (".json", ".jsonl", ".md", ".html")]
    for text in [*artifacts, metadata_text, logs]:
        assert SECRET not in text
    assert "RAG_EVAL_TEST_KEY" in (run_dir / "config.json").read_text()  # the variable's name, not its value
