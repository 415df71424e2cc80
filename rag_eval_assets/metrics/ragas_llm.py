"""ragas' LLM metrics asking through the project's LLMClient.

ragas' own client (an AsyncOpenAI client under instructor) bypassed our cache: every re-run sent every request
again. Behind this adapter its prompts go through `LLMClient.chat` with the output model's JSON Schema, so the
cache, retries, usage counts and schema mode are the same as for our own judges, and a re-run with unchanged
inputs sends nothing. A call that fails raises RagasLLMError with the client's error text, which the ragas row
keeps.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, TypeVar

import ragas
from pydantic import BaseModel
from ragas.llms.base import InstructorBaseRagasLLM

from rag_eval_assets.llm.client import LLMCall, LLMClient

Model = TypeVar("Model", bound=BaseModel)


class RagasLLMError(RuntimeError):
    """One ragas prompt that got no valid reply: the request failed for good, or the reply did not validate."""


class ClientRagasLLM(InstructorBaseRagasLLM):
    def __init__(self, client: LLMClient):
        self.client = client

    def generate(self, prompt: str, response_model: type[Model]) -> Model:
        return _parsed(self.client.chat(**_request(prompt, response_model)), response_model)

    async def agenerate(self, prompt: str, response_model: type[Model]) -> Model:
        # LLMClient is synchronous; a worker thread keeps ragas' event loop free for the other rows' prompts.
        call = await asyncio.to_thread(self.client.chat, **_request(prompt, response_model))
        return _parsed(call, response_model)

    def __repr__(self) -> str:
        return f"ClientRagasLLM({self.client!r})"


def _request(prompt: str, response_model: type[BaseModel]) -> dict[str, Any]:
    # The prompt text is in the cache key already; the version adds which ragas and output model asked.
    return {
        "messages": [{"role": "user", "content": prompt}],
        "prompt_version": f"ragas-{ragas.__version__}:{response_model.__name__}",
        "schema": reply_schema(response_model),
    }


def _parsed(call: LLMCall, response_model: type[Model]) -> Model:
    if call.error is not None:
        raise RagasLLMError(call.error)
    return response_model.model_validate(call.data)


def reply_schema(response_model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema with every object closed (`additionalProperties: false`), as OpenAI's strict
    json_schema mode requires; pydantic leaves them open."""
    schema = copy.deepcopy(response_model.model_json_schema())
    _close_objects(schema)
    return schema


def _close_objects(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)
