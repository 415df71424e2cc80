"""A small real RAG service on loopback speaking seed 002's `/api/v1/ask?debug=true` contract.

It ranks an in-memory corpus by term overlap with the question, answers with the top chunk's first
sentence and abstains when no chunk shares a term with the question. `faults` scripts the first
requests: an int answers with that HTTP status (429 carries Retry-After), "hang" waits past any
sane read timeout and closes without answering, "truncated_json" sends half of the real body,
"wrong_shape" drops `chunk_id` from the last chunk and makes the first chunk's `rank` a string.
`required_headers` makes it answer 401 to any request that lacks one of them with exactly that value.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from rag_eval_assets_tests.loopback_http import JsonHandler, serving

Fault = int | Literal["hang", "truncated_json", "wrong_shape"]

_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it my of on or the to was what when "
    "where which who why with you your".split()
)
_VECTOR_WEIGHT = 0.4  # score_final = 0.4 * score_vector + 0.6 * score_lexical


@dataclass(frozen=True)
class CorpusChunk:
    rel_path: str
    heading_path: str
    text: str


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class SutServer:
    url: str  # base URL, e.g. http://127.0.0.1:54321
    requests: list[RecordedRequest] = field(default_factory=list)


def terms(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _STOPWORDS]


def chunk_id_of(vault_id: str, chunk: CorpusChunk) -> str:
    """Seed 002's stable id: a hash of vault_id + rel_path + heading_path + chunk text."""
    key = "\x1f".join((vault_id, chunk.rel_path, chunk.heading_path, chunk.text))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def score_chunk(question: str, text: str) -> tuple[float, float, float]:
    """(score_vector, score_lexical, score_final): term-count cosine, share of question terms present."""
    q, c = Counter(terms(question)), Counter(terms(text))
    if not q or not c:
        return 0.0, 0.0, 0.0
    dot = sum(n * c[t] for t, n in q.items())
    vector = dot / (math.sqrt(sum(n * n for n in q.values())) * math.sqrt(sum(n * n for n in c.values())))
    lexical = len(q.keys() & c.keys()) / len(q)
    return vector, lexical, _VECTOR_WEIGHT * vector + (1 - _VECTOR_WEIGHT) * lexical


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]


class _Service:
    def __init__(self, corpus: Sequence[CorpusChunk], vault_id: str, question_field: str, k_field: str,
                 folders_field: str, chunks_key: str, abstention_fields: bool):
        self.corpus = [(chunk_id_of(vault_id, c), c) for c in corpus]
        self.question_field, self.k_field, self.folders_field = question_field, k_field, folders_field
        self.chunks_key = chunks_key
        self.abstention_fields = abstention_fields

    def ask(self, body: Any, debug: bool) -> tuple[int, dict[str, Any]]:
        if not isinstance(body, dict) or not isinstance(body.get(self.question_field), str):
            return 400, {"error": f"body must be an object with a string '{self.question_field}'"}
        question = body[self.question_field]
        k = body.get(self.k_field, 5)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            return 400, {"error": f"'{self.k_field}' must be a positive integer"}
        folders = body.get(self.folders_field)
        candidates = [
            (cid, c) for cid, c in self.corpus
            if folders is None or any(c.rel_path.startswith(f.rstrip("/") + "/") for f in folders)
        ]
        scored = [(score_chunk(question, c.text), order, cid, c) for order, (cid, c) in enumerate(candidates)]
        scored.sort(key=lambda s: (-s[0][2], s[1]))
        top = scored[:k]
        abstained = not top or top[0][0][2] == 0.0
        payload: dict[str, Any] = {
            "answer": "" if abstained else first_sentence(top[0][3].text),
            "references": [] if abstained else [
                {"chunk_id": top[0][2], "rel_path": top[0][3].rel_path, "heading_path": top[0][3].heading_path}
            ],
        }
        if self.abstention_fields:
            payload["abstained"] = abstained
            payload["abstain_reason"] = "no_relevant_context" if abstained else None
        if folders is not None:
            payload["folder_selection"] = {"folders": folders, "reasoning": "requested by caller"}
        if debug:
            payload[self.chunks_key] = [
                {
                    "chunk_id": cid,
                    "rel_path": c.rel_path,
                    "heading_path": c.heading_path,
                    "score_vector": vector,
                    "score_lexical": lexical,
                    "score_final": final,
                    "text": c.text,
                    "rank": rank,
                }
                for rank, ((vector, lexical, final), _, cid, c) in enumerate(top, start=1)
            ]
        return 200, payload


def unused_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def sut_server(
    corpus: Sequence[CorpusChunk],
    *,
    faults: Sequence[Fault] = (),
    retry_after: str = "0",
    hang_s: float = 5.0,
    path: str = "/api/v1/ask",
    vault_id: str = "test-vault",
    question_field: str = "question",
    k_field: str = "k",
    folders_field: str = "folders",
    chunks_key: str = "retrieved_chunks",
    abstention_fields: bool = True,
    required_headers: dict[str, str] | None = None,
) -> Iterator[SutServer]:
    """Serve on 127.0.0.1 on a free port in a background thread for the duration of the `with` block."""
    service = _Service(corpus, vault_id, question_field, k_field, folders_field, chunks_key, abstention_fields)
    pending = list(faults)
    lock = threading.Lock()
    stopping = threading.Event()
    state = SutServer(url="")

    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"


        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def _handle(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", errors="replace")
            parts = urlsplit(self.path)
            with lock:
                state.requests.append(
                    RecordedRequest(self.command, parts.path, parse_qs(parts.query), dict(self.headers), body)
                )
                fault = pending.pop(0) if pending else None
            if any(self.headers.get(name) != value for name, value in (required_headers or {}).items()):
                self._send(401, json.dumps({"error": "missing or wrong credentials"}).encode())
                return
            if parts.path != path:
                self._send(404, json.dumps({"error": f"no route {parts.path}"}).encode())
                return
            if fault == "hang":
                stopping.wait(hang_s)
                self.close_connection = True
                return
            if isinstance(fault, int):
                extra = {"Retry-After": retry_after} if fault == 429 else {}
                self._send(fault, json.dumps({"error": f"scripted {fault}"}).encode(), extra)
                return
            status, payload = service.ask(body, parse_qs(parts.query).get("debug") == ["true"])
            if fault == "wrong_shape" and status == 200:
                chunks = payload[service.chunks_key]
                del chunks[-1]["chunk_id"]
                chunks[0]["rank"] = str(chunks[0]["rank"])
            encoded = json.dumps(payload).encode("utf-8")
            if fault == "truncated_json":
                encoded = encoded[: len(encoded) // 2]
            self._send(status, encoded)

    with serving(Handler, stopping) as port:
        state.url = f"http://127.0.0.1:{port}"
        yield state
