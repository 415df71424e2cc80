"""The system under test behind HTTP: seed 002's `/api/v1/ask?debug=true` contract.

Request: a JSON body `{question_field: question, k_field: k, folders_field: folders?, **extra_body}`
sent to base_url + path with query parameter `debug=true` after base_url's own (sut_url.py), whatever the method.

Response (a JSON object):
- `answer`: string (null is read as "")
- `references`: list, optional (default [])
- `abstained`: bool, optional (None when absent so abstention can be inferred and marked as such)
- `abstain_reason`: string, optional
- `folder_selection`: anything, optional
- the retrieved chunks under `retrieved_chunks` or, failing that, `chunks` (not both), each with
  `chunk_id`, `rel_path`, `heading_path`, `text`, `rank` (int >= 1) required and `score_vector`,
  `score_lexical`, `score_final` optional (None when absent or null).
A response off this shape raises InputError naming the URL and every bad field
(e.g. `retrieved_chunks[3].chunk_id`); chunks come back sorted by rank.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.http_retry import RetryPolicy, send_with_retries
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.retrieval.sut_url import request_url, shown_url, url_problems


CHUNK_LIST_KEYS = ("retrieved_chunks", "chunks")
# Required string fields of a chunk, and whether "" is allowed ("" heading_path: text before any heading).
_CHUNK_STRINGS = {"chunk_id": False, "rel_path": False, "heading_path": True, "text": True}
_SCORE_FIELDS = ("score_vector", "score_lexical", "score_final")

_MISSING = object()

SUT_RESULT_COLUMNS = (
    "query_id",
    "retriever",
    "rank",
    "chunk_id",
    "doc_id",
    "score",
    "score_vector",
    "score_lexical",
    "latency_s",
    # The service's chunk ids are its own; these let gold anchors be matched against what it returned.
    "rel_path",
    "heading_path",
    "text",
)


@dataclass
class HttpSutConfig:
    base_url: str
    path: str = "/api/v1/ask"
    method: str = "POST"
    question_field: str = "question"
    k_field: str = "k"
    folders_field: str = "folders"
    extra_body: dict[str, Any] = field(default_factory=dict)
    # Filled by the caller from environment variables; kept out of repr so configs can be logged.
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        problems = url_problems(self.base_url, self.path)
        if problems:
            raise ValueError("; ".join(f"{key} {why}" for key, why in problems))
        clashes = {self.question_field, self.k_field, self.folders_field} & set(self.extra_body)
        if clashes:
            raise ValueError(f"extra_body must not set the request's own fields: {sorted(clashes)}")

    @property
    def url(self) -> str:
        return request_url(self.base_url, self.path)

    @property
    def shown_url(self) -> str:
        return shown_url(self.base_url, self.path)


@dataclass(frozen=True)
class SutChunk:
    chunk_id: str
    rel_path: str
    heading_path: str
    score_vector: float | None
    score_lexical: float | None
    score_final: float | None
    text: str
    rank: int  # 1-based


@dataclass(frozen=True)
class SutResponse:
    answer: str
    references: list[Any]
    abstained: bool | None  # None: the API did not say
    abstain_reason: str | None
    chunks: list[SutChunk]  # sorted by rank
    latency_s: float  # wall time of the call, retries and backoff included
    attempts: int  # 1 when the first try succeeded
    folder_selection: Any
    raw: dict[str, Any]


class HttpSutClient:
    """Asks the system under test over one pooled connection; use as a context manager or close()."""

    def __init__(
        self,
        config: HttpSutConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        self.config = config
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client = httpx.Client(
            headers=config.headers,
            timeout=httpx.Timeout(config.read_timeout, connect=config.connect_timeout),
        )

    def __enter__(self) -> HttpSutClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def ask(self, question: str, k: int, folders: list[str] | None = None) -> SutResponse:
        if not question.strip():
            raise ValueError("question is empty")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        cfg = self.config
        body: dict[str, Any] = {**cfg.extra_body, cfg.question_field: question, cfg.k_field: k}
        if folders is not None:
            body[cfg.folders_field] = list(folders)

        def build() -> httpx.Request:
            return self._client.build_request(cfg.method, cfg.url, json=body)

        started = time.perf_counter()
        sent = send_with_retries(
            self._client, build, cfg.retry, sleep=self._sleep, rng=self._rng, shown_url=cfg.shown_url
        )
        latency_s = time.perf_counter() - started
        return parse_sut_response(sent.response.content, cfg.shown_url, latency_s, len(sent.attempts))


def parse_sut_response(content: bytes, url: str, latency_s: float, attempts: int) -> SutResponse:
    """Read one response body against the contract in the module docstring."""
    url = redact_url(url)  # problems name it, and they end up in error columns and logs
    try:
        payload = json.loads(content)
    except ValueError as exc:
        excerpt = content[:80].decode("utf-8", errors="replace")
        raise InputError([InputProblem(url, None, None, f"response is not JSON ({exc}); body starts {excerpt!r}")])
    if not isinstance(payload, dict):
        raise InputError([InputProblem(url, None, None, f"response is a JSON {type(payload).__name__}, not an object")])

    problems: list[InputProblem] = []

    def problem(name: str, message: str) -> None:
        problems.append(InputProblem(url, None, name, message))

    answer = payload.get("answer", _MISSING)
    if answer is _MISSING:
        problem("answer", "missing")
    elif answer is not None and not isinstance(answer, str):
        problem("answer", f"must be a string, got {answer!r}")
    references = payload.get("references", [])
    if not isinstance(references, list):
        problem("references", f"must be a list, got {type(references).__name__}")
    abstained = payload.get("abstained")
    if abstained is not None and not isinstance(abstained, bool):
        problem("abstained", f"must be true or false, got {abstained!r}")
    abstain_reason = payload.get("abstain_reason")
    if abstain_reason is not None and not isinstance(abstain_reason, str):
        problem("abstain_reason", f"must be a string, got {abstain_reason!r}")

    present = [key for key in CHUNK_LIST_KEYS if key in payload]
    chunks: list[SutChunk] = []
    if not present:
        problem("retrieved_chunks", "missing (neither 'retrieved_chunks' nor 'chunks'; was debug=true honoured?)")
    elif len(present) > 1:
        problem("retrieved_chunks", "both 'retrieved_chunks' and 'chunks' present; which one is meant is unclear")
    elif not isinstance(payload[present[0]], list):
        problem(present[0], f"must be a list, got {type(payload[present[0]]).__name__}")
    else:
        chunks = _parse_chunks(present[0], payload[present[0]], problem)

    if problems:
        raise InputError(problems)
    return SutResponse(
        answer=answer or "",
        references=references,
        abstained=abstained,
        abstain_reason=abstain_reason,
        chunks=chunks,
        latency_s=latency_s,
        attempts=attempts,
        folder_selection=payload.get("folder_selection"),
        raw=payload,
    )


def _parse_chunks(key: str, items: list[Any], problem: Callable[[str, str], None]) -> list[SutChunk]:
    chunks: list[SutChunk] = []
    seen_ranks: dict[int, int] = {}
    for index, item in enumerate(items):
        where = f"{key}[{index}]"
        if not isinstance(item, dict):
            problem(where, f"must be an object, got {type(item).__name__}")
            continue
        ok = True
        for name, may_be_empty in _CHUNK_STRINGS.items():
            value = item.get(name, _MISSING)
            if value is _MISSING:
                problem(f"{where}.{name}", "missing")
                ok = False
            elif not isinstance(value, str) or not (value or may_be_empty):
                problem(f"{where}.{name}", f"must be a {'' if may_be_empty else 'non-empty '}string, got {value!r}")
                ok = False
        rank = item.get("rank", _MISSING)
        if rank is _MISSING:
            problem(f"{where}.rank", "missing")
            ok = False
        elif isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            problem(f"{where}.rank", f"must be an integer >= 1, got {rank!r}")
            ok = False
        elif rank in seen_ranks:
            problem(f"{where}.rank", f"rank {rank} repeats {key}[{seen_ranks[rank]}].rank")
            ok = False
        else:
            seen_ranks[rank] = index
        scores: dict[str, float | None] = {}
        for name in _SCORE_FIELDS:
            value = item.get(name)
            if value is None:
                scores[name] = None
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                problem(f"{where}.{name}", f"must be a number or null, got {value!r}")
                ok = False
            else:
                scores[name] = float(value)
        if ok:
            chunks.append(
                SutChunk(
                    chunk_id=item["chunk_id"],
                    rel_path=item["rel_path"],
                    heading_path=item["heading_path"],
                    text=item["text"],
                    rank=rank,
                    **scores,
                )
            )
    return sorted(chunks, key=lambda c: c.rank)


def sut_results_frame(
    question_ids: Sequence[str], responses: Sequence[SutResponse], retriever_name: str
) -> pd.DataFrame:
    """Long retrieval results, one row per retrieved chunk; doc_id is the note's rel_path.

    A question whose response retrieved nothing has no row: consumers take the question list from the evalset.
    """
    if len(question_ids) != len(responses):
        raise ValueError(f"{len(question_ids)} question ids but {len(responses)} responses")
    rows = [
        (qid, retriever_name, c.rank, c.chunk_id, c.rel_path, c.score_final, c.score_vector, c.score_lexical,
         r.latency_s, c.rel_path, c.heading_path, c.text)
        for qid, r in zip(question_ids, responses)
        for c in r.chunks
    ]
    frame = pd.DataFrame(rows, columns=list(SUT_RESULT_COLUMNS))
    return frame.astype(
        {
            "query_id": "str",
            "retriever": "str",
            "rank": "int64",
            "chunk_id": "str",
            "doc_id": "str",
            "score": "float64",
            "score_vector": "float64",
            "score_lexical": "float64",
            "latency_s": "float64",
            "rel_path": "str",
            "heading_path": "str",
            "text": "str",
        }
    )


def sut_chunks_frame(results: pd.DataFrame) -> pd.DataFrame:
    """The distinct chunks a service returned, shaped like the `chunks` table, for resolving gold anchors."""
    seen = results.drop_duplicates("chunk_id")
    return pd.DataFrame(
        {
            "chunk_id": seen["chunk_id"].to_numpy(),
            "doc_id": seen["doc_id"].to_numpy(),
            "rel_path": seen["rel_path"].to_numpy(),
            "heading_path": seen["heading_path"].to_numpy(),
            "page": pd.array([None] * len(seen), dtype="Int64"),
            "text": seen["text"].to_numpy(),
        }
    )
