"""The one retry policy for every outgoing HTTP call (system under test, LLM endpoints).

Retried: 429, 500, 502, 503, 504, timeouts and dropped or refused connections. A Retry-After header
(seconds or HTTP-date) replaces the computed backoff; both are capped at `max_delay`. Any other
status of 400 or above fails at once. Nothing here logs request headers: they carry API keys; URLs in logs and
errors pass through redaction.redact_url (their userinfo and token-like parameters may be credentials).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Annotated

import httpx
from pydantic import StrictBool, StrictFloat, StrictInt

from rag_eval_assets.redaction import redact_url
from rag_eval_assets.settings_base import Section, at_least

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_BODY_EXCERPT_CHARS = 200


class RetryPolicy(Section):
    max_attempts: Annotated[StrictInt, at_least(1)] = 5
    base_delay: Annotated[StrictFloat, at_least(0, "(delays are seconds)")] = 0.5
    max_delay: Annotated[StrictFloat, at_least(0, "(delays are seconds)")] = 30.0
    jitter: StrictBool = True

    def backoff(self, retry_index: int, rng: random.Random) -> float:
        """Delay before retry number `retry_index` (0 for the first retry): full jitter when enabled."""
        ceiling = min(self.max_delay, self.base_delay * 2**retry_index)
        return rng.uniform(0.0, ceiling) if self.jitter else ceiling


@dataclass(frozen=True)
class Attempt:
    """One try: the status it got or the transport error it raised, and the wait that followed it."""

    number: int  # 1-based
    status: int | None
    error: str | None
    delay_s: float | None  # sleep before the next attempt; None when no attempt followed

    def describe(self) -> str:
        outcome = f"status {self.status}" if self.status is not None else self.error
        return f"attempt {self.number}: {outcome}"


@dataclass(frozen=True)
class RetriedResponse:
    response: httpx.Response
    attempts: tuple[Attempt, ...]


class HttpCallError(RuntimeError):
    """An HTTP call that failed for good: a non-retryable status, or every attempt used up."""

    def __init__(self, method: str, url: str, attempts: tuple[Attempt, ...], detail: str = ""):
        self.method = method
        self.url = url
        self.attempts = attempts
        last = attempts[-1]
        self.last_status = last.status
        self.last_error = last.error
        history = "; ".join(a.describe() for a in attempts)
        message = f"{method} {url} failed after {len(attempts)} attempt(s) ({history})"
        if detail:
            message += f": {detail}"
        super().__init__(message)


def retry_after_seconds(value: str, now: datetime) -> float | None:
    """Seconds a Retry-After value asks for (delta-seconds or HTTP-date); None when unparseable."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive result means "-0000"
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - now).total_seconds()
    return max(0.0, seconds)


def send_with_retries(
    client: httpx.Client,
    request_fn: Callable[[], httpx.Request],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    shown_url: str | None = None,
) -> RetriedResponse:
    """Send the request `request_fn` builds (a fresh one per attempt) until it succeeds or fails for good.

    Returns the final response (status < 400) with every attempt made; raises HttpCallError otherwise. Logs and
    errors name the request's URL, or `shown_url` instead where the URL itself is a secret (a webhook).
    """
    rng = rng or random.Random()
    attempts: list[Attempt] = []
    while True:
        number = len(attempts) + 1
        is_last = number == policy.max_attempts
        request = request_fn()
        method, url = request.method, redact_url(shown_url or str(request.url))
        try:
            response = client.send(request)
        except httpx.UnsupportedProtocol as exc:  # a bad URL scheme never heals
            attempts.append(Attempt(number, None, _describe(exc), None))
            raise HttpCallError(method, url, tuple(attempts)) from exc
        except httpx.TransportError as exc:  # includes every httpx.TimeoutException
            if is_last:
                attempts.append(Attempt(number, None, _describe(exc), None))
                raise HttpCallError(method, url, tuple(attempts)) from exc
            delay = policy.backoff(number - 1, rng)
            attempts.append(Attempt(number, None, _describe(exc), delay))
        else:
            if response.status_code < 400:
                attempts.append(Attempt(number, response.status_code, None, None))
                return RetriedResponse(response, tuple(attempts))
            if response.status_code not in RETRY_STATUSES or is_last:
                attempts.append(Attempt(number, response.status_code, None, None))
                raise HttpCallError(method, url, tuple(attempts), _body_excerpt(response))
            delay = _delay_for(response, policy, number - 1, rng)
            attempts.append(Attempt(number, response.status_code, None, delay))
            response.close()
        logger.warning("%s %s: %s of %d; retrying in %.2f s",
                       method, url, attempts[-1].describe(), policy.max_attempts, delay)
        sleep(delay)


def _describe(exc: httpx.TransportError) -> str:
    # Timeouts often carry an empty message; the class name alone still says what happened.
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _delay_for(response: httpx.Response, policy: RetryPolicy, retry_index: int, rng: random.Random) -> float:
    header = response.headers.get("Retry-After")
    if header is not None:
        asked = retry_after_seconds(header, datetime.now(timezone.utc))
        if asked is not None:
            return min(asked, policy.max_delay)
    return policy.backoff(retry_index, rng)


def _body_excerpt(response: httpx.Response) -> str:
    text = response.text.strip()
    if len(text) > _BODY_EXCERPT_CHARS:
        text = text[:_BODY_EXCERPT_CHARS] + "..."
    return f"response body: {text!r}" if text else "empty response body"
