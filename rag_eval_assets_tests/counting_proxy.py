"""A loopback HTTP proxy that counts the requests it forwards, per path: a real count of what reached a server."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from rag_eval_assets_tests.loopback_http import JsonHandler, serving


@dataclass
class CountingProxy:
    url: str  # the upstream's base URL with the proxy's host and port, e.g. http://127.0.0.1:5432/v1
    requests: Counter[str] = field(default_factory=Counter)  # path -> requests forwarded


@contextmanager
def counting_proxy(upstream: str) -> Iterator[CountingProxy]:
    """Forward every GET and POST to `upstream` (scheme://host:port[/prefix]) as is, counting them by path."""
    parts = httpx.URL(upstream)
    origin = f"{parts.scheme}://{parts.netloc.decode()}"
    state = CountingProxy(url="")
    lock = threading.Lock()

    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._forward()

        def do_POST(self) -> None:
            self._forward()

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                state.requests[self.path.split("?")[0]] += 1
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
            reply = httpx.request(self.command, origin + self.path, content=body, headers=headers, timeout=600.0)
            self._send(reply.status_code, reply.content)

    with serving(Handler, threading.Event()) as port:
        state.url = f"http://127.0.0.1:{port}{parts.raw_path.decode()}"
        yield state
