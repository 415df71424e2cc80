"""Credentials never reach what the project writes: one redaction for every URL in files, metadata, logs and errors.

A URL's userinfo and the values of secret-looking query (and fragment) parameters become `***`:

    http://user:pa55@host/v1?token=abc&k=5  ->  http://user:***@host/v1?token=***&k=5
    https://ghp_abc@host/x                  ->  https://***@host/x

A password is replaced and the user name kept (it tells which account was used); userinfo without a password is
replaced whole, since a lone user name is often a token itself. Secret-looking parameter names (any case) are
SECRET_PARAMS and any name ending in one of SECRET_SUFFIXES. Requests still go to the real URL: this is only for
what is written. API keys never appear in a URL here; they travel in headers, which nothing writes.

A document written whole (a run's config.json) also loses every key that names a secret (drop_secrets): any key
containing one of SECRET_MARKERS (`api_key`, `x_auth_token`). Keys are matched by part and URL parameters by whole
name, because short parameter names such as `sig` or `key` occur inside many a harmless settings key.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"
SECRET_PARAMS = frozenset({
    "token", "key", "api_key", "apikey", "api-key", "access_token", "sig", "signature", "secret", "password",
    "passwd", "pwd", "auth",
})
SECRET_SUFFIXES = ("_token", "-token", "_key", "-key", "_secret", "-secret")
# A document key whose name contains one of these (any case) is never written, whatever its value.
SECRET_MARKERS = ("api_key", "apikey", "token", "secret", "password", "authorization")
# Settings that only name or size a secret-looking thing: the name of a key's environment variable, token counts.
NOT_SECRET = re.compile(r"(_env|_tokens)$")
# A URL inside free text ends at whitespace, a quote or a bracket: the shapes reprs, f-strings and logs give it.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}`\\]+")


def is_secret_param(name: str) -> bool:
    name = unquote(name).strip().lower()
    return name in SECRET_PARAMS or name.endswith(SECRET_SUFFIXES)


def redact_url(url: str) -> str:
    """`url` with its userinfo and secret-looking parameter values masked; anything else kept as written."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. a malformed IPv6 host: mask what looks like userinfo and parameters anyway
        return _redact_unparsed(url)
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, _redact_params(parts.query),
                       _redact_params(parts.fragment)))


def redact_text(text: str) -> str:
    """Every URL inside `text` (an error message, a log line, Markdown) passed through redact_url."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def redact(value: Any) -> Any:
    """A JSON-like document with redact_text applied to every string value (keys are kept)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def drop_secrets(value: Any) -> Any:
    """`value` without any mapping key whose name contains a SECRET_MARKERS entry, at any depth (keys matching
    NOT_SECRET, such as `api_key_env` or `max_tokens`, hold no secret and are kept)."""
    if isinstance(value, Mapping):
        return {k: drop_secrets(v) for k, v in value.items() if not _is_secret_key(str(k).lower())}
    if isinstance(value, (list, tuple)):
        return [drop_secrets(v) for v in value]
    return value


def _is_secret_key(key: str) -> bool:
    return any(m in key for m in SECRET_MARKERS) and not NOT_SECRET.search(key)


def install_log_redaction() -> None:
    """Redact every log record of this process as it is made, whichever logger makes it (httpx logs each
    request's full URL at INFO) and wherever it goes (terminal, Dagster's event log and compute logs).
    A record factory rather than a logging.Filter: a filter on a logger misses records of its child loggers."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "redacts", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    factory.redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it when the record is emitted
        return
    redacted = redact_text(message)
    if redacted != message:
        record.msg, record.args = redacted, ()
    if record.exc_info and not record.exc_text:
        # Formatters reuse exc_text when set, so the traceback's messages are written redacted too.
        record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))


def _redact_params(query: str) -> str:
    if not query:
        return query
    pairs = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        pairs.append(f"{name}={MASK}" if equals and is_secret_param(name) else pair)
    return "&".join(pairs)


def _redact_unparsed(url: str) -> str:
    url = re.sub(r"(://)[^/?#@\s]*@", rf"\1{MASK}@", url, count=1)
    return re.sub(r"([?&#])([^=&#\s]+)=[^&#\s]*",
                  lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_param(m.group(2)) else m.group(0), url)
