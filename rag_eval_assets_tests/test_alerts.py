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
