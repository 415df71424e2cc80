"""Alert delivery to a loopback webhook: retried with the project's policy, never raising, never naming the URL."""

from __future__ import annotations

import logging
from pathlib import Path

from rag_eval_assets.alerts import ALERT_FILE, Alert, send, send_once
from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.webhook_receiver import webhook_receiver

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, jitter=False)
ALERT = Alert("worse", "rag-eval: WORSE — sample@abc, run 1", ("bm25@5: ndcg@k 0.9 → 0.4", "report: r.html"))


def test_the_message_is_slack_json_with_a_plain_text_fallback():
    assert ALERT.payload() == {
        "text": "rag-eval: WORSE — sample@abc, run 1\nbm25@5: ndcg@k 0.9 → 0.4\nreport: r.html",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*rag-eval: WORSE — sample@abc, run 1*\n"
                                                                         "• bm25@5: ndcg@k 0.9 → 0.4\n• report: r.html"}}],
    }


def test_a_failing_receiver_is_retried_then_reported_without_the_url(caplog):
    caplog.set_level(logging.DEBUG)
    with webhook_receiver(fail_first=2) as hook:
        assert send(ALERT, hook.url, FAST) is None
        assert hook.attempts == 3 and hook.received == [ALERT.payload()]
    with webhook_receiver(fail_first=10) as hook:
        problem = send(ALERT, hook.url, FAST)
        assert hook.attempts == 3 and hook.received == []
    assert problem == ("worse alert not delivered to the alert webhook: attempt 1: status 500; attempt 2: status 500; "
                       "attempt 3: status 500")
    assert "canary-webhook-secret" not in caplog.text and "127.0.0.1" not in caplog.text
    refused = send(ALERT, "http://127.0.0.1:9/hooks/canary-webhook-secret", FAST)
    assert refused.endswith("attempt 3: ConnectError: [Errno 111] Connection refused") and "canary" not in refused


def test_a_run_alerts_once(tmp_path: Path):
    with webhook_receiver() as hook:
        assert send_once(ALERT, hook.url, tmp_path) == "sent (worse)"
        assert send_once(ALERT, hook.url, tmp_path) == "already sent for this run (worse)"
        assert len(hook.received) == 1 and (tmp_path / ALERT_FILE).is_file()


def test_the_alerts_section_reads_the_bare_yaml_key_on(tmp_path: Path):
    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    config = tmp_path / "rag_eval.yaml"
    config.write_text(f"corpus: {{id: s, path: {sample / 'corpus'}}}\n"
                      f"evalset: {{name: s, path: {sample / 'evalsets' / 'eval_set.jsonl'}}}\n"
                      "alerts:\n  webhook_url_env: HOOK\n  on: [failed]\n", encoding="utf-8")
    assert load_settings(config).alerts.on == ("failed",)


def test_a_canceled_nightly_run_alerts_once(tmp_path: Path, monkeypatch):
    """A canceled night's run alerts once; a canceled run of its pipeline does not (the night's own failure or
    cancellation is the one alert)."""
    import dagster as dg

    from rag_eval_assets.defs.night_story import NIGHTLY_JOB, night_tags
    from rag_eval_assets.definitions import build_defs
    from rag_eval_assets_tests.sample_config import write_sample_config

    config = write_sample_config(tmp_path, "alerts: {webhook_url_env: RAG_EVAL_TEST_HOOK, on: [failed]}\n")
    defs = build_defs(config)
    sensor = defs.get_sensor_def("nightly_cancel_alert")
    (tmp_path / "home").mkdir()
    with webhook_receiver() as hook, dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        monkeypatch.setenv("RAG_EVAL_TEST_HOOK", hook.url)

        def canceled(job: str, night: str) -> dg.DagsterRun:
            """A run of `job` in `night`, canceled, and the cancel sensor evaluated on it."""
            run = instance.create_run_for_job(defs.resolve_job_def(job), tags=night_tags(night))
            instance.report_run_canceled(run, "canceled by the operator")
            run = instance.get_run_by_id(run.run_id)
            event = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_CANCELED).records[0]
            sensor(dg.build_run_status_sensor_context(sensor_name=sensor.name, dagster_instance=instance,
                                                      dagster_run=run,
                                                      dagster_event=event.event_log_entry.dagster_event))
            return run

        pipeline_run = canceled("inputs_job", "2026-11-23")
        assert pipeline_run.status == dg.DagsterRunStatus.CANCELED and hook.received == []
        run = canceled(NIGHTLY_JOB, "2026-11-24")
    assert run.status == dg.DagsterRunStatus.CANCELED
    (message,) = hook.received
    assert message["text"].splitlines() == ["rag-eval: nightly run canceled — nightly_job", "night: 2026-11-24",
                                            "job: nightly_job", f"dagster run: {run.run_id}",
                                            "error: nightly_job was canceled"]
