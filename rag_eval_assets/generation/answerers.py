"""The LLM answerer (our prompt over the retrieved contexts) and the HTTP answerer (the system under test's own
answer); the extractive answerer lives in extractive.py."""

from __future__ import annotations

import json
import math
from typing import Any

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.generation.abstention import infer_abstention
from rag_eval_assets.generation.answers import Answer, error_answer
from rag_eval_assets.generation.citations import Context, citation_label
from rag_eval_assets.generation.prompts import ANSWER_PROMPT, ANSWER_SCHEMA, prompt_version
from rag_eval_assets.llm.client import LLMCall, LLMClient
from rag_eval_assets.llm.prompts import Prompt
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.retrieval.http_sut import SutResponse

NO_CONTEXT = "(no passages were retrieved)"


def format_contexts(contexts: list[Context]) -> str:
    """Numbered passages, each headed by its source label: "[1] (стр. 3)\\n<text>"."""
    if not contexts:
        return NO_CONTEXT
    return "\n\n".join(f"[{i}] ({c.label})\n{c.text}" for i, c in enumerate(contexts, start=1))


def llm_answerer_version(model: str, prompt: Prompt = ANSWER_PROMPT) -> dict[str, Any]:
    """What an LLMAnswerer records as its version, known from the settings alone."""
    return {"answerer": LLMAnswerer.kind, "model": model, "prompt": prompt_version(prompt),
            "prompt_sha256": prompt.sha256}


class LLMAnswerer:
    """Answers from the numbered contexts with ANSWER_PROMPT; the reply's context numbers become citations.

    A cited number that names no context is kept as a citation with chunk_id None and a label saying so, so a
    model citing passages it was not given is visible (it never counts as an attribution hit).
    """

    kind = "llm"
    needs_contexts = True

    def __init__(self, client: LLMClient, prompt: Prompt = ANSWER_PROMPT):
        self.client = client
        self.prompt = prompt

    @property
    def version(self) -> dict[str, Any]:
        return llm_answerer_version(self.client.settings.model, self.prompt)

    def answer_many(self, questions: list[Question], contexts: list[list[Context]], k: int) -> list[Answer]:
        requests = [
            {
                "messages": self.prompt.render(contexts=format_contexts(ctx), question=q.question),
                "prompt_version": prompt_version(self.prompt),
                "schema": ANSWER_SCHEMA,
            }
            for q, ctx in zip(questions, contexts, strict=True)
        ]
        calls = self.client.chat_many(requests)
        return [self._answer(call, ctx) for call, ctx in zip(calls, contexts)]

    def _answer(self, call: LLMCall, contexts: list[Context]) -> Answer:
        if call.error is not None or call.data is None:
            return error_answer(contexts, call.error or "no structured reply", call.latency_s,
                                prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                                cost_usd=call.cost_usd, model=call.model, prompt_sha256=self.prompt.sha256)
        data = call.data
        citations = []
        for number in dict.fromkeys(data["citations"]):
            if 1 <= number <= len(contexts):
                citations.append(contexts[number - 1].citation())
            else:
                citations.append({"chunk_id": None, "rel_path": None, "heading_path": None, "page": None,
                                  "label": f"[{number}] names no context"})
        abstained = bool(data["abstained"])
        reason = (data["abstain_reason"].strip() or None) if abstained else None
        return Answer(data["answer"].strip(), citations, abstained, False, reason, contexts, call.latency_s,
                      call.prompt_tokens, call.completion_tokens, call.cost_usd, call.model, self.prompt.sha256,
                      None)


class HttpAnswerer:
    """The system under test's answers, read from its stored responses (retrieval/sut_responses.py: one call per
    question at the largest k, seed 002's `/api/v1/ask?debug=true`), the same answer at every k.

    Its contexts are the chunks the system retrieved (it has no pages). References become citations: a string or
    an object's chunk_id naming a retrieved chunk takes that chunk's rel_path and heading_path; an object's own
    rel_path / heading_path / page win. When the system gives no `abstained` flag it is inferred from the answer
    text (abstention.infer_abstention) and marked abstained_inferred. Cost is unknown (NaN). A call that failed
    for good, or a reply off the contract, is an error row.
    """

    kind = "http"
    needs_contexts = False

    def __init__(self, responses: dict[str, SutResponse | str], url: str):
        self.responses = responses
        self.url = url

    @property
    def version(self) -> dict[str, Any]:
        return {"answerer": self.kind, "url": redact_url(self.url)}

    def answer_many(self, questions: list[Question], contexts: list[list[Context]], k: int) -> list[Answer]:
        return [self._answer(q) for q in questions]

    def _answer(self, question: Question) -> Answer:
        response = self.responses.get(question.id, "no response was stored for this question")
        if isinstance(response, str):
            return error_answer([], response, math.nan)
        contexts = [Context(c.chunk_id, c.rel_path, c.heading_path, None, c.text) for c in response.chunks]
        citations = [_citation(ref, response) for ref in response.references]
        if response.abstained is None:
            reason = infer_abstention(response.answer)
            abstained, inferred = reason is not None, True
        else:
            reason = response.abstain_reason if response.abstained else None
            abstained, inferred = response.abstained, False
        return Answer(response.answer, citations, abstained, inferred, reason, contexts, response.latency_s, None,
                      None, math.nan, None, None, None)


def _citation(ref: Any, response: SutResponse) -> dict[str, Any]:
    fields = ref if isinstance(ref, dict) else {"chunk_id": ref} if isinstance(ref, str) else {}
    chunk_id = fields.get("chunk_id") if isinstance(fields.get("chunk_id"), str) else None
    retrieved = next((c for c in response.chunks if c.chunk_id == chunk_id), None)
    rel_path = fields.get("rel_path") or (retrieved.rel_path if retrieved else None)
    heading_path = fields.get("heading_path") or (retrieved.heading_path if retrieved else "")
    page = fields.get("page")
    page = page if isinstance(page, int) and not isinstance(page, bool) else None
    if rel_path:
        label = citation_label(rel_path, heading_path, page)
    else:
        label = chunk_id or json.dumps(ref, ensure_ascii=False)
    return {"chunk_id": chunk_id, "rel_path": rel_path, "heading_path": heading_path, "page": page, "label": label}
