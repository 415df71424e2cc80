"""An LLM outage is never a green run: `rag-eval run` against servers that fail in four ways ends non-zero within
the retry policy's time, says why (the blocking call_health check, naming the endpoint and the first error), and
the run directory shows the failed calls instead of dropping the metrics."""

from __future__ import annotations

import json
import time

import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.generation.prompts import GROUNDEDNESS_SCHEMA
from rag_eval_assets.runs.store import list_runs
from rag_eval_assets_tests.llm_fault_server import Reply, Status, llm_fault_server
from rag_eval_assets_tests.sample_config import write_sample_config

GOOD_JUDGMENTS = 6  # before the server dies


def _dies_after_some_judgments():
    served = []

    def responder(body):
        served.append(1)
        if len(served) > GOOD_JUDGMENTS:
            return "drop"  # the connection closes unanswered, as when the server is killed
        if body["response_format"]["schema"] == GROUNDEDNESS_SCHEMA:
            return Reply(json.dumps({"supported_claims": [], "unsupported_claims": [], "score": 3}))
        return Reply(json.dumps({"reasoning": "ok", "score": 3}))

    return responder


MODES = {
    "500 for every call": (dict(script=[Status(500)] * 5000), "llm", "status 500"),
    "cut-off JSON": (dict(script=["truncated"] * 5000), "extractive", "judge correctness"),
    "replies that ignore the schema": (dict(responder=lambda body: Reply("I think it is fine.")), "extractive",
                                       "judge correctness"),
    "killed mid-judging": (dict(responder=None), "extractive", "RemoteProtocolError"),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_an_llm_outage_fails_the_run_and_says_why(mode, tmp_path, monkeypatch, capsys):
    server_options, answerer, reason = MODES[mode]
    if server_options.get("responder", 1) is None:
        server_options = dict(responder=_dies_after_some_judgments())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    with llm_fault_server(**server_options) as server:
        config = write_sample_config(tmp_path, (
            "retrievers: [bm25]\nk_values: [1, 5]\n"
            f"answering: {{k_values: [5], answerer: {answerer}}}\n"
            f"llm: {{base_url: '{server.base_url}', model: m, read_timeout: 5, "
            "retry: {max_attempts: 2, base_delay: 0.0, max_delay: 0.0}}\n"))
        start = time.monotonic()
        code = main(["--config", str(config), "run"])
        elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 1, err
    assert "check evaluation_run:call_health failed:" in err and reason in err, err
    # An LLM answerer fails first (no judge is asked then); after extractive answers the judge is what fails.
    who = "the answerer LLM" if answerer == "llm" else "the judge"
    assert f"calls to {who} at {server.base_url} failed (" in err, err
    assert elapsed < 240  # two attempts per call, no waiting between them: bounded, never a hang
    (run_dir,) = list_runs(tmp_path / "store" / "runs")
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    health = {(h["stage"], h["metric"]): h for h in metrics["call_health"]}
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "## Calls behind the answer metrics" in summary
    notes = {n["metric"]: n["reason"] for n in metrics["not_computed"]}  # one answer cell: no cell named
    if answerer == "llm":  # every answer failed, so nothing reached the judges: said, never silently missing
        assert health[("answer", "answer")]["errors"] == health[("answer", "answer")]["calls"] == 14
        assert health[("judge", "groundedness")]["calls"] == 0
        assert notes["groundedness"] == "not computed: no row was sent (answer_error)"
        return
    judge = {m: h for (stage, m), h in health.items() if stage == "judge"}
    assert set(judge) == {"groundedness", "correctness"} and all(h["errors"] > 0 for h in judge.values())
    if mode != "killed mid-judging":  # every judgment failed: the metric says why it has no value
        calls = judge["groundedness"]["calls"]  # the answers that did not abstain
        assert calls > 0 and judge["groundedness"]["errors"] == calls
        assert notes["groundedness"].startswith(f"not computed: {calls} of {calls} calls failed (")
        assert f"not computed: {calls} of {calls} calls failed" in (run_dir / "report.html").read_text(encoding="utf-8")
