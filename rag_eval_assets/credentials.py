"""Credentials that settings name by environment variable, read the one way both preflight and the HTTP clients
read them: `api_key_env` (a key sent as `Authorization: Bearer <key>`) and `headers_env` (a JSON object of request
headers). Errors name the setting's dotted key and the variable, never the value: both hold secrets. A value an HTTP
header cannot carry is refused here, because the HTTP library's own error would quote it."""

from __future__ import annotations

import json
import os
import re

# RFC 9110 token: what h11 accepts as a header name.
_HEADER_NAME = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


class CredentialError(ValueError):
    """`setting` (a dotted key) names `variable`, whose value is missing or unusable: `why`, without the value."""

    def __init__(self, setting: str, variable: str, why: str):
        self.setting = setting
        self.problem = f"names {variable}, {why}"
        super().__init__(f"{setting} {self.problem}")


def _header_safe(value: str) -> bool:
    # httpx encodes header values as ASCII; h11 refuses CR, LF, NUL and whitespace at either end.
    return value.isascii() and value == value.strip(" \t") and not any(c in value for c in "\r\n\0")


def bearer_key(variable: str, setting: str) -> str:
    """The key held by environment variable `variable`, which `setting` names."""
    key = os.environ.get(variable)
    if key is None:
        raise CredentialError(setting, variable, "which is not set in the environment")
    if not key.strip():
        raise CredentialError(setting, variable, "which is empty")
    if not _header_safe(key):
        raise CredentialError(setting, variable, "whose value an HTTP header cannot carry (a non-ASCII or control "
                                                 "character, or whitespace at either end)")
    return key


def headers_from_env(variable: str | None, setting: str) -> dict[str, str]:
    """The JSON object of string headers held by environment variable `variable` ({} when None), which `setting`
    names."""
    if not variable:
        return {}
    raw = os.environ.get(variable)
    if raw is None:
        raise CredentialError(setting, variable, "which is not set in the environment")
    try:
        headers = json.loads(raw)
    except json.JSONDecodeError as exc:
        # Only the position: the message of a JSON error quotes no input, but the text around it would.
        raise CredentialError(setting, variable, f"which is not valid JSON (line {exc.lineno}, column {exc.colno})"
                              ) from None
    if not isinstance(headers, dict):
        kind = _JSON_KINDS.get(type(headers), type(headers).__name__)
        raise CredentialError(setting, variable, f"which holds a JSON {kind}, not an object of headers")
    bad = sorted(name for name, value in headers.items() if not isinstance(value, str))
    if bad:
        raise CredentialError(setting, variable, f"whose headers {bad} have values that are not strings")
    # A name that is no header name may be a value pasted in the wrong place: counted, never shown.
    bad_names = sum(not _HEADER_NAME.fullmatch(name) for name in headers)
    if bad_names:
        raise CredentialError(setting, variable, f"which holds {bad_names} key(s) that are not HTTP header names "
                                                 "(letters, digits and !#$%&'*+-.^_`|~ only)")
    bad = sorted(name for name, value in headers.items() if not _header_safe(value))
    if bad:
        raise CredentialError(setting, variable, f"whose headers {bad} have values an HTTP header cannot carry (a "
                                                 "non-ASCII or control character, or whitespace at either end)")
    return headers
