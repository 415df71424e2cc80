"""Where the system under test is asked: `base_url` (its path prefix and query included) + `path` + `debug=true`.

httpx replaces a URL's whole query when given `params=`, which lost a `?token=...` on base_url; so the query is
composed here once, as written, and the request is sent without `params=`. A part that could not be kept (a
fragment is never sent; a query on `path`; a `debug` of base_url's own that would clash with ours) is a
configuration error. The query may carry a token, so messages never quote it and `shown_url` masks its values.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit

from rag_eval_assets.redaction import redact_url

DEBUG_PARAM = "debug=true"
_MASK = "***"


def url_problems(base_url: str, path: str) -> list[tuple[str, str]]:
    """(key under retrieval.http, why) for each part of the address that could not be sent as written."""
    problems: list[tuple[str, str]] = []
    if not base_url.startswith(("http://", "https://")):
        problems.append(("base_url", "must start with http:// or https://"))
        return problems
    parts = urlsplit(base_url)
    if "#" in base_url:
        problems.append(("base_url", "has a fragment (#...), which is never sent to the server"))
    if any(key == "debug" for key, _ in parse_qsl(parts.query, keep_blank_values=True)):
        problems.append(("base_url", "sets `debug` in its query; the client sends debug=true itself"))
    if "?" in path or "#" in path:
        problems.append(("path", "must be a path only; put query parameters on base_url, where they are kept"))
    return problems


def request_url(base_url: str, path: str) -> str:
    """base_url's scheme, host and path prefix, then `path`; base_url's query as written, then debug=true."""
    parts = urlsplit(base_url)
    full_path = parts.path.rstrip("/") + "/" + path.lstrip("/")
    query = "&".join(q for q in (parts.query, DEBUG_PARAM) if q)
    return urlunsplit((parts.scheme, parts.netloc, full_path, query, ""))


def shown_url(base_url: str, path: str) -> str:
    """request_url with the values of base_url's own query parameters masked (any of them may be a service's
    credential, whatever its name) and its userinfo redacted, for errors and logs."""
    parts = urlsplit(base_url)
    masked = "&".join(f"{key}={_MASK}" for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    return redact_url(request_url(urlunsplit((parts.scheme, parts.netloc, parts.path, masked, "")), path))
