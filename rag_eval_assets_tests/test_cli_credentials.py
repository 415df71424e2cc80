"""`rag-eval run` with a credential variable that is unset or malformed: preflight stops the run before any input is
written (exit 2), naming the setting's dotted key and the variable, never the variable's value."""

from __future__ import annotations

import dagster as dg
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.fingerprints import FINGERPRINTS
from rag_eval_assets_tests.sample_config import write_sample_config

CANARY = "canary-secret-7f3"
NOWHERE = "http://127.0.0.1:9"  # never called: preflight stops the run first
CASES = {
    "unset service key": (
        f"retrievers: [bm25, http]\nretrieval: {{http: {{base_url: '{NOWHERE}', api_key_env: RAG_TEST_SUT_KEY}}}}\n",
        {},
        "retrieval.http.api_key_env", "names RAG_TEST_SUT_KEY, which is not set in the environment",
    ),
    # A key read from a file written on Windows keeps its CR: httpx's own error would quote the whole header.
    "service key with a CR": (
        f"retrievers: [bm25, http]\nretrieval: {{http: {{base_url: '{NOWHERE}', api_key_env: RAG_TEST_SUT_KEY}}}}\n",
        {"RAG_TEST_SUT_KEY": f"sk-{CANARY}\r"},
        "retrieval.http.api_key_env", "names RAG_TEST_SUT_KEY, whose value an HTTP header cannot carry",
    ),
    # A named variant's own setting is named where it was written. The JSON ends after 32 characters, inside the
    # object: `{` + `"X-Tenant"` (10) + `: ` (2) + `"canary-secret-7f3"` (19) = 32, so column 33 expects a `,`.
    "malformed headers of a named service": (
        f"retrievers:\n  bm25: {{kind: bm25}}\n  tenant_a: {{kind: http, base_url: '{NOWHERE}', "
        "headers_env: RAG_TEST_SUT_HEADERS}\n",
        {"RAG_TEST_SUT_HEADERS": f'{{"X-Tenant": "{CANARY}"'},
        "retrievers.tenant_a.headers_env", "names RAG_TEST_SUT_HEADERS, which is not valid JSON (line 1, column 33)",
    ),
    "unset llm key": (
        f"retrievers: [bm25]\nllm: {{base_url: '{NOWHERE}/v1', model: m, api_key_env: RAG_TEST_LLM_KEY}}\n",
        {},
        "llm.api_key_env", "names RAG_TEST_LLM_KEY, which is not set in the environment",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_credential_variable_stops_the_run_at_preflight(case, tmp_path, monkeypatch, capsys):
    extra, variables, setting, problem = CASES[case]
    for name in ("RAG_TEST_SUT_KEY", "RAG_TEST_SUT_HEADERS", "RAG_TEST_LLM_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    config = write_sample_config(tmp_path, extra + "k_values: [1, 5]\nanswering: {k_values: [5]}\n")

    assert main(["run", "--config", str(config)]) == 2
    out, err = capsys.readouterr()
    assert f"{config}: field '{setting}': {problem}" in out.splitlines()[0], out
    (log,) = (tmp_path / "store" / "runs").glob("failed-*.log")
    log_text = log.read_text(encoding="utf-8")
    assert " preflight STEP_FAILURE - " in log_text
    assert CANARY not in out + err + log_text

    # One run, of the inputs job, in which nothing downstream of preflight started: besides preflight only the
    # fingerprints of the input files (its peers: they read file hashes and settings, and no table is written).
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        started = {e.step_key for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)}
        materialized = {e.asset_materialization.asset_key.to_user_string() for e in
                        instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)}
        stored = "\n".join(str(e.message) + str(e.dagster_event) for e in instance.all_logs(run.run_id))
    assert (run.job_name, run.status) == ("inputs_job", dg.DagsterRunStatus.FAILURE)
    assert "preflight" in started and started - {"preflight"} <= set(FINGERPRINTS), started
    assert materialized <= set(FINGERPRINTS), materialized
    assert CANARY not in stored
    assert not (tmp_path / "store" / "assets").exists() or not any((tmp_path / "store" / "assets").rglob("*.parquet"))
