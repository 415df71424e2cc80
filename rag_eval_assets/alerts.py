"""Alerts: one message per event (a worse or incompatible verdict; a failed or canceled nightly run, or a failed
`rag-eval run`) posted to an incoming webhook.

The body is Slack's incoming-webhook JSON: `text` is the whole message in plain text (what Mattermost, a Teams
workflow or a generic receiver reads, and Slack's notification fallback) and `blocks` the same in Slack's mrkdwn.
The webhook URL is a secret: it is read from the environment variable the configuration names, and never written
to a file, a log line or an error (deliveries are described as "the alert webhook"). Delivery is retried with the
project's retry policy; a failure is logged and returned, never raised: an unreachable chat server must not fail
an evaluation.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from rag_eval_assets.http_retry import HttpCallError, RetryPolicy, send_with_retries
from rag_eval_assets.runs.listing import run_eval_set_version
from rag_eval_assets.runs.store import TIMESTAMP_FORMAT
from rag_eval_assets.settings import AlertSettings
from rag_eval_assets.verdict.text import interval_text, p_text, signed

logger = logging.getLogger(__name__)

SHOWN_AS = "the alert webhook"
ALERT_FILE = "alert.json"  # in a run directory: its verdict alert went out (a re-execution does not send it again)
DELIVERY_POLICY = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=10.0)
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


@dataclass(frozen=True)
class Alert:
    event: str  # worse | incompatible | failed
    title: str
    lines: tuple[str, ...]

    def text(self) -> str:
        return "\n".join([self.title, *self.lines])

    def payload(self) -> dict[str, Any]:
        body = "\n".join(f"• {line}" for line in self.lines)
        return {"text": self.text(),
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{self.title}*\n{body}"}}]}


def verdict_alert(comparison: dict[str, Any], run_dir: Path, report: Path, evalset: str) -> Alert:
    """The verdict, the cells that decided it with their deltas and intervals, the evalset, run id and report."""
    verdict = comparison["verdict"]
    cells = {f"{c['retriever']}@{c['k']}": c for c in comparison["cells"]}
    lines = [f"{name}: {_cell(cells[name])}" for name in comparison["deciding_cells"] if name in cells]
    lines += [f"incompatible: {reason}" for reason in comparison["incompatible"]]
    lines += [f"evalset: {evalset}", f"run: {run_dir.name} against baseline {comparison['base_run_id']}",
              f"report: {report}"]
    return Alert(verdict, f"rag-eval: {verdict.upper()} — {evalset}, run {run_dir.name}", tuple(lines))


def failure_alert(job: str, partition: str | None, run_id: str, status: str, error: str | None,
                  night: str | None, run_dir: Path | None = None) -> Alert:
    """A failed or canceled run: a night's (`night`) or one started by hand; `run_dir` when it wrote one."""
    where = job + (f" [{partition}]" if partition else "")
    lines = [f"night: {night}" if night else None, f"job: {where}", f"dagster run: {run_id}",
             f"error: {error}" if error else None, f"run directory: {run_dir}" if run_dir else None]
    title = f"rag-eval: {'nightly ' if night else ''}run {status.lower()} — {where}"
    return Alert("failed", title, tuple(x for x in lines if x))


def webhook_url(env_var: str) -> str | None:
    return os.environ.get(env_var) or None


@contextmanager
def _transport_logs_quiet() -> Iterator[None]:
    """httpx logs every request's full URL at INFO (httpcore its host at DEBUG): not while the URL is a secret."""
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def send(alert: Alert, url: str, policy: RetryPolicy = DELIVERY_POLICY) -> str | None:
    """Post `alert`; None when delivered, else what went wrong (without the URL). Never raises."""
    data = json.dumps(alert.payload(), ensure_ascii=False).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    try:
        with _transport_logs_quiet(), httpx.Client(timeout=TIMEOUT) as client:
            send_with_retries(client, lambda: client.build_request("POST", url, content=data, headers=headers),
                              policy, shown_url=SHOWN_AS)
    except HttpCallError as exc:
        # Attempt descriptions hold statuses and exception names, never the URL.
        problem = f"{alert.event} alert not delivered to {SHOWN_AS}: " + "; ".join(a.describe() for a in exc.attempts)
    except (httpx.HTTPError, ValueError) as exc:  # a malformed URL: say what kind of problem, not the URL
        problem = f"{alert.event} alert not delivered to {SHOWN_AS}: {type(exc).__name__}"
    else:
        return None
    logger.warning(problem)
    return problem


def send_once(alert: Alert, url: str, run_dir: Path) -> str:
    """Send the verdict alert of a run unless it already went out; what happened, for the asset's metadata."""
    marker = run_dir / ALERT_FILE
    if marker.is_file():
        return f"already sent for this run ({json.loads(marker.read_text(encoding='utf-8'))['event']})"
    problem = send(alert, url)
    if problem is not None:
        return problem
    record = {"event": alert.event, "sent_at": datetime.now(timezone.utc).strftime(TIMESTAMP_FORMAT)}
    marker.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return f"sent ({alert.event})"


@dataclass(frozen=True)
class Outcome:
    """What became of a run's verdict alert, for the asset's metadata; `warning`: the webhook variable is unset."""

    text: str
    warning: bool = False


def alert_on_verdict(alerts: AlertSettings | None, comparison: dict[str, Any] | None, run_dir: Path,
                     report: Path) -> Outcome | None:
    """The verdict alert of the run in `run_dir` when alerts.on holds its verdict, sent once (send_once); None
    when no alert is due (no alerts section, no baseline, a verdict alerts.on leaves out)."""
    verdict = comparison["verdict"] if comparison else None
    if alerts is None or verdict not in alerts.on:
        return None
    url = webhook_url(alerts.webhook_url_env)
    if url is None:
        return Outcome(f"not sent: alerts.webhook_url_env names {alerts.webhook_url_env}, which is not set", True)
    evalset = str(run_eval_set_version(run_dir))
    return Outcome(send_once(verdict_alert(comparison, run_dir, report, evalset), url, run_dir))


def _cell(c: dict[str, Any]) -> str:
    return (f"{c['metric']} {c['base']:.3f} → {c['cand']:.3f} ({signed(c['delta'], 3)} "
            f"{interval_text(c['ci_low'], c['ci_high'], 3)}, p_adj {p_text(c['p_adjusted'])})")
