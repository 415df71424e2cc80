"""Structured replies: the response_format each schema mode sends, validation of a reply against the schema
(the `jsonschema` package), and the one repair request sent when a reply does not validate."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators

from rag_eval_assets.llm.settings import SchemaMode

_MAX_ERRORS_REPORTED = 5
_OPENAI_NAME = re.compile(r"[^A-Za-z0-9_-]")


def check_schema(schema: dict[str, Any]) -> None:
    """Raise ValueError for a schema that is not a valid JSON Schema for an object (a configuration error)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"a reply schema must be a JSON Schema with \"type\": \"object\", got {schema!r}")
    try:
        validators.validator_for(schema).check_schema(schema)
    except jsonschema_exceptions.SchemaError as exc:
        raise ValueError(f"invalid JSON Schema: {exc.message}") from exc


def response_format(schema: dict[str, Any], mode: SchemaMode) -> dict[str, Any]:
    if mode == "json_object_schema":  # llama.cpp's servers turn the schema into a grammar
        return {"type": "json_object", "schema": schema}
    # OpenAI's form; the name must match ^[A-Za-z0-9_-]{1,64}$
    name = _OPENAI_NAME.sub("_", str(schema.get("title") or "reply"))[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def validate_reply(content: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(data, None) when `content` is a JSON object valid against `schema`, else (None, what is wrong)."""
    try:
        data = json.loads(content)
    except ValueError as exc:
        excerpt = content if len(content) <= 120 else content[:120] + "..."
        return None, f"the reply is not valid JSON ({exc}): {excerpt!r}"
    validator = validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.path))))
    if errors:
        described = [f"{e.json_path}: {e.message}" for e in errors[:_MAX_ERRORS_REPORTED]]
        more = len(errors) - len(described)
        return None, "; ".join(described) + (f"; and {more} more" if more else "")
    return data, None


def repair_messages(
    messages: list[dict[str, str]], reply: str, problem: str, schema: dict[str, Any]
) -> list[dict[str, str]]:
    """The conversation so far, the invalid reply, and a request for corrected JSON naming what was wrong."""
    request = (
        f"Your reply does not match the required JSON Schema: {problem}\n"
        f"The schema is:\n{json.dumps(schema, ensure_ascii=False)}\n"
        "Reply again with only the corrected JSON object, no other text."
    )
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": request}]
