"""One client for any OpenAI-compatible `/chat/completions` endpoint (llama.cpp, vLLM, Ollama, OpenAI).

Every request is sent through `http_retry.send_with_retries` (429, 5xx, timeouts and dropped connections are
retried with backoff, Retry-After honoured). A request with a schema asks for JSON in the settings' schema
mode, validates the reply and, when it does not validate, sends one repair request; a reply that still does
not validate, or a call that fails for good, comes back with `error` set and `data` None: only
configuration mistakes (bad messages, schema or params) raise. The API key goes into the Authorization
header only: never into repr, errors, logs or cache keys; the URL they name is redacted (redaction.py).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from rag_eval_assets.http_retry import HttpCallError, send_with_retries
from rag_eval_assets.llm.cache import CachedReply, LLMCache, cache_key
from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.llm.structured import check_schema, repair_messages, response_format, validate_reply
from rag_eval_assets.llm.usage import UsageRecorder, cost_usd
from rag_eval_assets.redaction import redact_url

logger = logging.getLogger(__name__)

# Fixed by the settings or by the client itself; a per-call override would bypass the cache key's meaning.
RESERVED_PARAMS = frozenset(
    {"model", "messages", "temperature", "seed", "max_tokens", "response_format", "stream", "n"}
)
_CHAT_MANY_KEYS = frozenset({"messages", "prompt_version", "schema", "params"})


@dataclass(frozen=True)
class LLMCall:
    content: str  # the last reply's text ("" when no reply came)
    data: dict[str, Any] | None  # the validated reply when a schema was given
    cached: bool
    prompt_tokens: int  # of every request the call made (repair included); a cached call reports the stored ones
    completion_tokens: int
    latency_s: float  # wall time with retries and repair; a cached call reports the stored call's
    cost_usd: float  # spent by this call: 0.0 when cached or when the model has no price
    attempts: int  # HTTP requests sent (retries and repair included); 0 when cached
    error: str | None
    model: str
    priced: bool = True  # False when the model is missing from the price table (cost_usd is then 0.0)


@dataclass(frozen=True)
class _Prepared:
    messages: list[dict[str, str]]
    prompt_version: str
    schema: dict[str, Any] | None
    params: dict[str, Any]
    key: str


@dataclass
class _Spent:
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class _Reply:
    content: str
    finish_reason: str | None


class _CallFailed(Exception):
    pass


class LLMClient:
    """Use as a context manager or call close(); safe to share between threads."""

    def __init__(
        self,
        settings: LLMSettings,
        cache: LLMCache | None = None,
        api_key: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        self.settings = settings
        self.cache = cache
        self._shown_url = redact_url(settings.chat_url)  # what errors and logs name
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._usage = UsageRecorder()
        # Bounds requests in flight across every thread using this client, not only within one chat_many.
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        self._http = httpx.Client(
            headers={**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})},
            timeout=httpx.Timeout(settings.read_timeout, connect=settings.connect_timeout),
        )

    def __repr__(self) -> str:
        return f"LLMClient(model={self.settings.model!r}, base_url={redact_url(self.settings.base_url)!r})"

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def usage(self) -> dict[str, float]:
        return self._usage.snapshot()

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        prompt_version: str,
        schema: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> LLMCall:
        return self._run(self._prepare(messages, prompt_version, schema, params))

    def chat_many(self, requests: Sequence[Mapping[str, Any]]) -> list[LLMCall]:
        """chat() over dicts of its arguments, at most max_concurrency at a time; results in input order.
        Every request is checked before the first is sent."""
        prepared = []
        for index, request in enumerate(requests):
            unknown = request.keys() - _CHAT_MANY_KEYS
            missing = {"messages", "prompt_version"} - request.keys()
            if unknown or missing:
                raise ValueError(f"chat_many request {index}: unknown keys {sorted(unknown)}, "
                                 f"missing keys {sorted(missing)}")
            prepared.append(self._prepare(request["messages"], request["prompt_version"],
                                          request.get("schema"), request.get("params")))
        if not prepared:
            return []
        with ThreadPoolExecutor(max_workers=min(self.settings.max_concurrency, len(prepared))) as pool:
            return list(pool.map(self._run, prepared))

    def _prepare(
        self,
        messages: list[dict[str, str]],
        prompt_version: str,
        schema: dict[str, Any] | None,
        params: dict[str, Any] | None,
    ) -> _Prepared:
        _check_messages(messages)
        if not prompt_version:
            raise ValueError("prompt_version is empty")
        if schema is not None:
            check_schema(schema)
        params = dict(params or {})
        reserved = RESERVED_PARAMS & params.keys()
        if reserved:
            raise ValueError(f"params must not set {sorted(reserved)}: they come from LLMSettings")
        params["max_tokens"] = self.settings.max_tokens
        s = self.settings
        key = cache_key(model=s.model, prompt_version=prompt_version, temperature=s.temperature, seed=s.seed,
                        params=params, schema=schema, messages=messages)
        return _Prepared([dict(m) for m in messages], prompt_version, schema, params, key)

    def _run(self, request: _Prepared) -> LLMCall:
        s = self.settings
        priced = s.price is not None
        self._usage.add(calls=1)
        hit = self.cache.get(request.key) if self.cache is not None else None
        if hit is not None:
            self._usage.add(cache_hits=1)
            data = validate_reply(hit.content, request.schema)[0] if request.schema is not None else None
            return LLMCall(hit.content, data, True, hit.prompt_tokens, hit.completion_tokens, hit.latency_s,
                           0.0, 0, None, s.model, priced)

        body: dict[str, Any] = {"model": s.model, "messages": request.messages, "temperature": s.temperature,
                                "seed": s.seed, **request.params}
        if request.schema is not None:
            body["response_format"] = response_format(request.schema, s.schema_mode)
        spent = _Spent()
        started = time.perf_counter()
        content, data, error = "", None, None
        try:
            reply = self._complete(body, spent)
            content = reply.content
            if request.schema is not None:
                data, problem = _validated(reply, request.schema)
                if problem is not None:
                    repair = {**body, "messages": repair_messages(request.messages, content, problem,
                                                                  request.schema)}
                    reply = self._complete(repair, spent)
                    content = reply.content
                    data, problem = _validated(reply, request.schema)
                    if problem is not None:
                        error = f"the reply does not match the schema after one repair request: {problem}"
        except _CallFailed as exc:
            error = str(exc)
        latency_s = time.perf_counter() - started

        cost = cost_usd(spent.prompt_tokens, spent.completion_tokens, s.price)
        self._usage.add(prompt_tokens=spent.prompt_tokens, completion_tokens=spent.completion_tokens,
                        cost_usd=cost, errors=int(error is not None), unpriced_calls=int(not priced))
        if error is not None:
            logger.warning("LLM call to %s (model %s) failed: %s", self._shown_url, s.model, error)
        elif self.cache is not None:
            self.cache.put(request.key, s.model, request.prompt_version,
                           CachedReply(content, spent.prompt_tokens, spent.completion_tokens, latency_s))
        return LLMCall(content, data, False, spent.prompt_tokens, spent.completion_tokens, latency_s, cost,
                       spent.attempts, error, s.model, priced)

    def _complete(self, body: dict[str, Any], spent: _Spent) -> _Reply:
        """One chat completion (with retries); adds what it spent to `spent`."""
        url = self.settings.chat_url
        with self._slots:
            try:
                sent = send_with_retries(self._http, lambda: self._http.build_request("POST", url, json=body),
                                         self.settings.retry, sleep=self._sleep, rng=self._rng)
            except HttpCallError as exc:
                spent.attempts += len(exc.attempts)
                self._usage.add(requests=len(exc.attempts))
                raise _CallFailed(str(exc)) from exc
        spent.attempts += len(sent.attempts)
        self._usage.add(requests=len(sent.attempts))
        return self._read_reply(sent.response, spent)

    def _read_reply(self, response: httpx.Response, spent: _Spent) -> _Reply:
        url = self._shown_url
        try:
            payload = response.json()
        except ValueError as exc:
            excerpt = response.content[:120].decode("utf-8", errors="replace")
            raise _CallFailed(f"POST {url}: response body is not JSON ({exc}); it starts {excerpt!r}") from exc
        usage = payload.get("usage") if isinstance(payload, dict) else None
        if isinstance(usage, dict):
            spent.prompt_tokens += _count(usage.get("prompt_tokens"))
            spent.completion_tokens += _count(usage.get("completion_tokens"))
        else:
            self._usage.add(missing_usage=1)
        try:
            choice = payload["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise _CallFailed(f"POST {url}: response has no choices[0].message: "
                              f"{json.dumps(payload)[:200]}") from exc
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            raise _CallFailed(f"POST {url}: the reply has no text content"
                              + (f" (refusal: {refusal!r})" if refusal else ""))
        finish_reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        return _Reply(content, finish_reason if isinstance(finish_reason, str) else None)


def _validated(reply: _Reply, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    data, problem = validate_reply(reply.content, schema)
    if problem is not None and reply.finish_reason == "length":
        problem += " (the reply was cut off at max_tokens)"
    return data, problem


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _check_messages(messages: list[dict[str, str]]) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...}")
    problems = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            problems.append(f"messages[{index}] must have exactly the keys 'role' and 'content'")
        elif not isinstance(message["role"], str) or not message["role"]:
            problems.append(f"messages[{index}].role must be a non-empty string")
        elif not isinstance(message["content"], str):
            problems.append(f"messages[{index}].content must be a string")
    if problems:
        raise ValueError("; ".join(problems))
