"""RAGAS context precision / recall through ragas 0.4.3: the non-LLM variants on a tiny real example, the rows built
from retrieval results and gold, error rows for every failure, and the LLM variants through the project's LLM
client and cache against a loopback OpenAI-compatible server that answers with fixed verdicts."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pandas as pd
import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm.cache import LLMCache
from rag_eval_assets.llm.client import LLMClient
from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.metrics.ragas_context import RAGAS_COLUMNS, ContextRow, context_rows, ragas_context_metrics

PARIS = "Paris is the capital and largest city of France."
BERLIN = "Berlin hosts many museums and a large zoo near the Tiergarten."
EIFFEL = "The Eiffel Tower was completed in 1889 for the World's Fair."


def values(table: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {(r.query_id, r.metric): r.value for r in table.itertuples()}


def errors(table: pd.DataFrame) -> dict[tuple[str, str], Any]:
    return {(r.query_id, r.metric): r.error for r in table.itertuples() if isinstance(r.error, str)}


def test_non_llm_variants_by_hand() -> None:
    rows = [
        # relevant first: verdicts [1, 0] -> average precision 1; the one reference is retrieved -> recall 1
        ContextRow("q1", "What is the capital of France?", [PARIS, BERLIN], [PARIS]),
        # relevant second: verdicts [0, 1] -> (1/2) / 1 = 0.5
        ContextRow("q2", "What is the capital of France?", [BERLIN, PARIS], [PARIS]),
        # two references, one retrieved (a near copy): recall 1/2; precision 1
        ContextRow("q3", "Paris facts?", ["Paris is the capital and largest city of France"], [PARIS, EIFFEL]),
    ]
    table = ragas_context_metrics(rows)
    assert list(table.columns) == list(RAGAS_COLUMNS)
    assert values(table) == pytest.approx(
        {
            ("q1", "context_precision"): 1.0,
            ("q1", "context_recall"): 1.0,
            ("q2", "context_precision"): 0.5,
            ("q2", "context_recall"): 1.0,
            ("q3", "context_precision"): 1.0,
            ("q3", "context_recall"): 0.5,
        }
    )
    assert set(table["variant"]) == {"non_llm"}
    assert errors(table) == {}
    assert table["value"].between(0, 1).all()


def test_failures_become_error_rows_never_dropped() -> None:
    rows = [
        ContextRow("empty", "q?", [], [PARIS]),
        ContextRow("no_gold", "q?", [PARIS], []),
        # a context that is not a string: ragas' own sample validation raises
        ContextRow("broken", "q?", [PARIS, None], [PARIS]),  # type: ignore[list-item]
        ContextRow("fine", "q?", [PARIS], [PARIS]),
    ]
    table = ragas_context_metrics(rows)
    assert len(table) == 8
    found = errors(table)
    assert found[("empty", "context_precision")] == "no retrieved contexts"
    assert found[("no_gold", "context_recall")] == "no reference contexts: the question has no chunk-level gold"
    assert found[("broken", "context_precision")].startswith("ValidationError: 1 validation error for SingleTurnSample")
    assert found[("broken", "context_recall")].startswith("ValidationError")
    assert ("fine", "context_precision") not in found
    assert math.isnan(values(table)[("broken", "context_recall")])
    assert values(table)[("fine", "context_recall")] == 1.0


def question(qid: str, reference_answer: str | None = None) -> Question:
    return Question(id=qid, question=f"question {qid}?", format="seed001", reference_answer=reference_answer)


def test_context_rows_from_results_and_gold() -> None:
    chunks = pd.DataFrame({"chunk_id": ["c1", "c2", "c3", "c4"], "text": [PARIS, BERLIN, EIFFEL, "other"]})
    results = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q1", "q2"],
            "retriever": "bm25",
            "rank": [2, 1, 3, 4, 1],
            "chunk_id": ["c2", "c1", "c1", "c3", "c4"],  # c1 twice: counted once, at its best rank
        }
    )
    gold = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2"],
            "chunk_id": ["c1", "c3", "c2"],
            "source": ["gold_chunk_ids", "gold_supports", "gold_doc_ids"],  # document-level gold is no reference
        }
    )
    rows = context_rows([question("q1", "Paris."), question("q2"), question("q3")], results, chunks, gold, k=3)
    assert rows == [
        ContextRow("q1", "question q1?", [PARIS, BERLIN, EIFFEL], [PARIS, EIFFEL], "Paris."),
        ContextRow("q2", "question q2?", ["other"], [], None),
        ContextRow("q3", "question q3?", [], [], None),
    ]
    with pytest.raises(InputError, match="'c9' is not a chunk of the corpus"):
        context_rows([question("q1")], results.assign(chunk_id="c9"), chunks, gold, k=3)


class _Endpoint(BaseHTTPRequestHandler):
    """Chat completions with a fixed verdict: context useful (1); recall statements [attributed, not attributed],
    or none when the question says so; HTTP 500 when the question asks for it."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)  # type: ignore[attr-defined]
        prompt = json.dumps(body["messages"], ensure_ascii=False)
        if "FAIL" in prompt:
            self._send(500, {"error": {"message": "boom"}})
            return
        if "classifications" in prompt:
            statements = [] if "NOTHING" in prompt else [("s1", 1), ("s2", 0)]
            content = {"classifications": [{"statement": s, "reason": "r", "attributed": a} for s, a in statements]}
        else:
            content = {"reason": "useful", "verdict": 1}
        message = {"role": "assistant", "content": json.dumps(content)}
        self._send(
            200,
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def endpoint() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_llm_variants_ask_through_the_project_client_and_its_cache(
    endpoint: ThreadingHTTPServer, tmp_path
) -> None:
    settings = LLMSettings(
        base_url=f"http://127.0.0.1:{endpoint.server_port}/v1",
        model="judge-model",
        temperature=0.0,
        max_tokens=256,
        seed=7,
        retry=RetryPolicy(max_attempts=1),
    )
    rows = [
        ContextRow("q1", "What is the capital of France?", [PARIS, BERLIN], [PARIS], "Paris."),
        ContextRow("q2", "NOTHING to classify", [PARIS], [PARIS]),
        ContextRow("q3", "FAIL please", [PARIS], [PARIS]),
        ContextRow("q4", "no reference", [PARIS], []),
    ]
    with LLMCache(tmp_path / "llm.sqlite") as cache:
        with LLMClient(settings, cache, api_key="secret") as client:
            table = ragas_context_metrics(rows, llm=client)
            usage = client.usage()
        sent = list(endpoint.requests)  # type: ignore[attr-defined]
        with LLMClient(settings, cache, api_key="secret") as client:
            again = ragas_context_metrics(rows, llm=client)
            usage_again = client.usage()
    assert set(table["variant"]) == {"llm"}
    got = values(table)
    # every context judged useful: average precision 1; one of two statements attributed: recall 0.5
    assert got[("q1", "context_precision")] == pytest.approx(1.0)
    assert got[("q1", "context_recall")] == 0.5
    found = errors(table)
    assert found[("q2", "context_recall")] == "ragas returned NaN"
    # The endpoint's 500 reaches the row as the client's own error text, body excerpt included.
    url = settings.chat_url
    for metric in ("context_precision", "context_recall"):
        assert found[("q3", metric)].startswith(f"RagasLLMError: POST {url} failed after 1 attempt(s) (attempt 1: "
                                                "status 500")
        assert "boom" in found[("q3", metric)]
    assert found[("q4", "context_precision")] == (
        "no reference contexts: the question has no chunk-level gold and no reference answer"
    )
    assert len(table) == 8
    # q1: two contexts + one recall prompt; q2: one + one; q3: both fail. The good replies are cached.
    assert len(sent) == usage["requests"] == 7 and usage["errors"] == 2
    first = sent[0]
    assert (first["model"], first["temperature"], first["max_tokens"], first["seed"]) == ("judge-model", 0.0, 256, 7)
    assert first["response_format"]["type"] == "json_object"
    assert first["response_format"]["schema"]["additionalProperties"] is False
    # q1's reference answer is what the LLM compares against
    assert any("Paris." in json.dumps(r["messages"]) for r in sent)
    # Unchanged inputs: every good reply comes from the cache; only the failed q3 calls are asked again.
    assert len(endpoint.requests) - len(sent) == usage_again["requests"] == 2  # type: ignore[attr-defined]
    assert usage_again["cache_hits"] == 5
    pd.testing.assert_frame_equal(again, table)
