"""A scripted OpenAI-compatible `/v1/chat/completions` server on loopback, for the LLM client's fault tests.

Each request takes the next step of `script`; once the script is used up, `responder(body)` gives the step.
Steps: `Reply` (a completion with that content and usage), `Status` (that HTTP status, 429 with
Retry-After when given), "hang" (wait past any sane read timeout, then close without answering),
"truncated" (half of a real completion body), "drop" (close the connection without a response).
`delay_s` slows every reply, so a batch can be interrupted part-way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from rag_eval_assets_tests.loopback_http import JsonHandler, serving

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int = 11
    completion_tokens: int = 7
    finish_reason: str = "stop"
    usage: bool = True  # False: leave the `usage` object out


@dataclass(frozen=True)
class Status:
    code: int
    retry_after: str | None = None


Step = Reply | Status | Literal["hang", "truncated", "drop"]


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FaultServer:
    base_url: str  # ends in /v1, as LLMSettings.base_url expects
    requests: list[ReceivedRequest] = field(default_factory=list)
    max_in_flight: int = 0

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]


def echo(body: Any) -> Reply:
    """Answers "echo: <last message>", so distinct requests get distinct replies."""
    return Reply("echo: " + body["messages"][-1]["content"])


def completion(reply: Reply, model: str) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": reply.content},
             "finish_reason": reply.finish_reason}
        ],
    }
    if reply.usage:
        payload["usage"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
    return payload


@contextmanager
def llm_fault_server(
    script: Sequence[Step] = (),
    *,
    responder: Callable[[Any], Step] = echo,
    delay_s: float = 0.0,
    hang_s: float = 5.0,
) -> Iterator[FaultServer]:
    """Serve on 127.0.0.1 on a free port in a background thread for the duration of the `with` block."""
    pending = list(script)
    lock = threading.Lock()
    stopping = threading.Event()
    state = FaultServer(base_url="")
    in_flight = 0

    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"


        def do_POST(self) -> None:
            nonlocal in_flight
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else None
            with lock:
                state.requests.append(ReceivedRequest(self.path, dict(self.headers), body))
                step = pending.pop(0) if pending else None
                in_flight += 1
                state.max_in_flight = max(state.max_in_flight, in_flight)
            try:
                self._answer(body, step)
            finally:
                with lock:
                    in_flight -= 1

        def _answer(self, body: Any, step: Step | None) -> None:
            if self.path != CHAT_PATH:
                self._send(404, json.dumps({"error": f"no route {self.path}"}).encode())
                return
            if step is None:
                step = responder(body)
            if step in ("hang", "drop"):
                if step == "hang":
                    stopping.wait(hang_s)
                self.close_connection = True
                return
            if isinstance(step, Status):
                extra = {"Retry-After": step.retry_after} if step.retry_after is not None else {}
                self._send(step.code, json.dumps({"error": {"message": f"scripted {step.code}"}}).encode(), extra)
                return
            reply = step if isinstance(step, Reply) else responder(body)
            if delay_s:
                stopping.wait(delay_s)
            encoded = json.dumps(completion(reply, body.get("model", ""))).encode("utf-8")
            if step == "truncated":
                encoded = encoded[: len(encoded) // 2]
            self._send(200, encoded)

    with serving(Handler, stopping) as port:
        state.base_url = f"http://127.0.0.1:{port}/v1"
        yield state


def schema_reply(body: Any) -> Reply:
    """A valid reply to any structured request: the smallest instance of the JSON Schema it asks for (judges and
    ragas alike), so a pipeline against this server succeeds; plain text for a request without a schema."""
    response_format = body.get("response_format") or {}
    schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema")
    if schema is None:
        return Reply("A plain answer.")
    return Reply(json.dumps(_instance(schema, schema.get("$defs") or schema.get("definitions") or {})))


def _instance(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            return _instance(schema[combined][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        return {key: _instance(value, defs) for key, value in schema.get("properties", {}).items()}
    if kind == "array":
        return [_instance(schema.get("items", {"type": "string"}), defs)] * schema.get("minItems", 1)
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return "x"
