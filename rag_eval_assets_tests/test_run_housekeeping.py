"""What run_comparison does after the gate, as library calls: the verdict's alert (alerts.py alert_on_verdict),
retention (runs/baseline.py apply_retention), and the baseline of a run being rewritten (baseline_of_run)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from rag_eval_assets.alerts import ALERT_FILE, alert_on_verdict
from rag_eval_assets.runs.baseline import PINNED, accept, apply_retention, baseline_of_run
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.store import read_run
from rag_eval_assets.settings import AlertSettings
from rag_eval_assets_tests.test_comparison_table import _compared
from rag_eval_assets_tests.test_runs_baseline import EVALSET, _run
from rag_eval_assets_tests.test_runs_store import write_sample_run
from rag_eval_assets_tests.test_verdict_compare import BASE
from rag_eval_assets_tests.webhook_receiver import webhook_receiver

HOOK_VAR = "RAG_TEST_HOUSEKEEPING_HOOK"


def test_a_due_verdict_alert_goes_out_once_and_an_unset_variable_is_a_warning(tmp_path: Path, monkeypatch):
    worse = _compared(tmp_path / "compared", BASE - set(range(12)))
    run_dir = write_sample_run(tmp_path / "runs")
    alerts = AlertSettings(webhook_url_env=HOOK_VAR, on=("worse",))
    report = run_dir / "report.html"

    assert alert_on_verdict(None, worse, run_dir, report) is None
    assert alert_on_verdict(alerts, None, run_dir, report) is None  # no baseline, no verdict
    assert alert_on_verdict(AlertSettings(webhook_url_env=HOOK_VAR, on=("failed",)), worse, run_dir, report) is None

    monkeypatch.delenv(HOOK_VAR, raising=False)
    unset = alert_on_verdict(alerts, worse, run_dir, report)
    assert (unset.text, unset.warning) == (f"not sent: alerts.webhook_url_env names {HOOK_VAR}, which is not set", True)
    with webhook_receiver() as hook:
        monkeypatch.setenv(HOOK_VAR, hook.url)
        sent = alert_on_verdict(alerts, worse, run_dir, report)
        again = alert_on_verdict(alerts, worse, run_dir, report)
        assert (sent.text, sent.warning, again.text) == ("sent (worse)", False, "already sent for this run (worse)")
        (body,) = hook.received
    assert body["text"].startswith(f"rag-eval: WORSE — {EVALSET}, run {run_dir.name}")
    assert f"report: {report}" in body["text"] and (run_dir / ALERT_FILE).is_file()


def test_retention_spares_the_run_its_baseline_and_accepted_runs(tmp_path: Path):
    days = {day: _run(tmp_path, day, None) for day in (20, 21, 22, 23, 24)}
    accept(days[20])
    assert apply_retention(tmp_path, days[24], None, days[21]) is None
    assert len(list_runs(tmp_path)) == 5
    note = apply_retention(tmp_path, days[24], 1, days[21])
    assert note == f"kept the newest 1 runs of this evalset; removed 2: {days[23].name}, {days[22].name}"
    assert list_runs(tmp_path) == [days[24], days[21], days[20]]
    assert apply_retention(tmp_path, days[24], 1, None) == f"kept the newest 1 runs of this evalset; removed 1: " \
                                                           f"{days[21].name}"


def test_a_rewritten_run_keeps_its_recorded_baseline(tmp_path: Path):
    first = write_sample_run(tmp_path, now=datetime(2026, 11, 20, tzinfo=timezone.utc))
    second = write_sample_run(tmp_path, now=datetime(2026, 11, 21, tzinfo=timezone.utc), previous=first,
                              baseline_policy={"run_id": first.name, "policy": PINNED, "skipped": []})
    recorded = baseline_of_run(tmp_path, EVALSET, read_run(second))
    assert (recorded.path, recorded.policy) == (first, PINNED)
    # A new run (nothing to rewrite) is compared by the policy: no good run yet, so none.
    fresh = baseline_of_run(tmp_path, EVALSET, None)
    assert fresh.path is None and [s.run_id for s in fresh.skipped] == [second.name, first.name]
    assert baseline_of_run(tmp_path, EVALSET, None, pinned=first.name).path == first
