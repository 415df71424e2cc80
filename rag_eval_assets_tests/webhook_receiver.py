"""A loopback incoming-webhook receiver: records every POSTed JSON body; can answer 500 to the first N posts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rag_eval_assets_tests.loopback_http import JsonHandler, serving


@dataclass
class Receiver:
    url: str
    received: list[dict] = field(default_factory=list)  # bodies of the posts answered 200
    attempts: int = 0
    fail_first: int = 0


@contextmanager
def webhook_receiver(path: str = "/hooks/T000/B000/canary-webhook-secret", fail_first: int = 0) -> Iterator[Receiver]:
    lock = threading.Lock()
    state: dict[str, Receiver] = {}

    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            receiver = state["receiver"]
            with lock:
                receiver.attempts += 1
                failing = receiver.attempts <= receiver.fail_first
                if not failing:
                    receiver.received.append(json.loads(body))
            self._send(500 if failing else 200, b"{}")

    with serving(Handler, threading.Event()) as port:
        state["receiver"] = Receiver(f"http://127.0.0.1:{port}{path}", fail_first=fail_first)
        yield state["receiver"]
