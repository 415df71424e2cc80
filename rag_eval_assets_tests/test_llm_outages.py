"""An LLM outage is never a green run: `rag-eval run` against servers that fail in four ways ends non-zero within
the retry policy's time, says why (the blocking call_health check, naming the endpoint and the first error), and
the run directory shows the failed calls instead of dropping the metrics. Nor does it become a baseline: the night
after an outage is compared with the last good one, and the outage posts its `failed` alert."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.generation.prompts import GROUNDEDNESS_SCHEMA
from rag_eval_assets.runs.baseline import NEWEST_GOOD, choose_baseline
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets_tests.llm_fault_server import Reply, Status, llm_fault_server, schema_reply
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.webhook_receiver import webhook_receiver

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
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "check evaluation_run:call_health failed:" in out and reason in out, out
    # An LLM answerer fails first (no judge is asked then); after extractive answers the judge is what fails.
    who = "the answerer LLM" if answerer == "llm" else "the judge"
    assert f"calls to {who} at {server.base_url} failed (" in out, out
    # The line that says how the run went says it failed and why, never a verdict beside exit 1.
    assert "run failed (exit 1): check evaluation_run:call_health failed: bm25@5 " in out and "verdict:" not in out
    assert elapsed < 240  # two attempts per call, no waiting between them: bounded, never a hang
    (run_dir,) = list_runs(tmp_path / "store" / "runs")
    status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert status["state"] == "failed" and status["reasons"][0].startswith("check evaluation_run:call_health failed:")
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


HOOK_ENV = "RAG_EVAL_TEST_OUTAGE_WEBHOOK"


def _status_line(out: list[str]) -> str:
    """The line that says how the run went: its verdict, or that it failed and why."""
    (line,) = [line for line in out if line.startswith(("verdict: ", "run failed "))]
    return line


def test_a_run_after_an_outage_is_compared_with_the_last_good_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    runs_dir = tmp_path / "store" / "runs"
    down = threading.Event()
    with llm_fault_server(responder=lambda body: Status(500) if down.is_set() else schema_reply(body)) as server, \
            webhook_receiver() as hook:
        monkeypatch.setenv(HOOK_ENV, hook.url)

        def run(seed: int) -> dict:
            config = write_sample_config(tmp_path, (
                "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
                f"llm: {{base_url: '{server.base_url}', model: m, seed: {seed}, "
                "retry: {max_attempts: 1, base_delay: 0.0, max_delay: 0.0}}\n"
                f"alerts: {{webhook_url_env: {HOOK_ENV}, on: [failed]}}\n"))
            before = set(list_runs(runs_dir))
            code = main(["--config", str(config), "run"])
            out, err = capsys.readouterr()
            (new,) = [p for p in list_runs(runs_dir) if p not in before]
            status = json.loads((new / "status.json").read_text(encoding="utf-8"))
            return {"code": code, "out": out.splitlines(), "err": err, "dir": new, "status": status,
                    "messages": list(hook.received), "config": config}

        good = run(seed=0)
        down.set()
        outage = run(seed=1)  # another seed: the judges are asked again, not answered from the LLM cache
        assert main(["--config", str(outage["config"]), "baseline", "show"]) == 0
        shown = capsys.readouterr().out.splitlines()
        down.clear()
        again = run(seed=1)  # the same settings: what the outage left uncommitted is redone

    assert [r["code"] for r in (good, outage, again)] == [0, 1, 0], outage["err"]
    assert [r["status"]["state"] for r in (good, outage, again)] == ["good", "failed", "good"]
    (reason,) = outage["status"]["reasons"]
    first_error = (f"first error: POST {server.base_url}/chat/completions failed after 1 attempt(s) (attempt 1: "
                   """status 500): response body: '{"error": {"message": "scripted 500"}}'""")
    assert reason.startswith("check evaluation_run:call_health failed: bm25@5 judge correctness: 11 of 11 calls "
                             f"to the judge at {server.base_url} failed (100% > 5%); {first_error}; ")
    assert reason in "\n".join(outage["out"])  # whole below the first line

    lines = [_status_line(r["out"]) for r in (good, outage, again)]
    assert lines == [
        "verdict: no baseline run yet: nothing to compare",
        "run failed (exit 1): check evaluation_run:call_health failed: bm25@5 judge correctness: 11 of 11 calls "
        f"to the judge at {server.base_url} failed (100% > 5%); {first_error}; …",
        f"verdict: no significant change against run {good['dir'].name} (exit 0; decided by none)",
    ]
    assert not [line for line in outage["out"] if "no significant change" in line]

    comparison = json.loads((again["dir"] / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["base_run_id"] == good["dir"].name
    assert comparison["baseline"]["skipped"] == [{"run_id": outage["dir"].name, "why": reason}]
    version = json.loads((good["dir"] / "config.json").read_text())["version_tuple"]["dataset"]["eval_set_version"]
    assert shown == [f"baseline of the next run of {version}: {good['dir'].name}",
                     f"policy: {NEWEST_GOOD}", f"skipped {outage['dir'].name}: {reason}"]

    # The outage alone posts its alert: the failed check and where its run directory is.
    assert [len(r["messages"]) for r in (good, outage, again)] == [0, 1, 1]
    (metrics_run,) = [line.split("(run ")[1].rstrip(")") for line in outage["err"].splitlines()
                      if line.startswith("metrics_job: FAILED")]
    assert outage["messages"][0]["text"].splitlines() == [
        "rag-eval: run failure — metrics_job", "job: metrics_job", f"dagster run: {metrics_run}",
        f"error: {reason}", f"run directory: {outage['dir']}"]
    assert "rag-eval: failure alert: sent (failed)" in outage["err"]

    # Accepted by hand, the outage run is a baseline after all.
    assert main(["--config", str(outage["config"]), "baseline", "accept", outage["dir"].name]) == 0
    assert f"although it is not a good run: {reason}" in capsys.readouterr().out
    assert choose_baseline(runs_dir, version, before=again["dir"].name).path == outage["dir"]
