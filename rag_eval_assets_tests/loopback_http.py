"""What the scripted test servers share: a JSON request handler and serving it on a free loopback port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, extra_headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], stopping: threading.Event) -> Iterator[int]:
    """Serve `handler` on 127.0.0.1 in a background thread; yields the port. On exit `stopping` is set first, so
    handlers that hang on purpose (waiting on it) return and the server can shut down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
