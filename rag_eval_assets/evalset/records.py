"""Reading an evalset file into JSON objects: JSON Lines or one JSON array, UTF-8 with or without BOM.

Every unreadable line is recorded as a problem and reading goes on, so one pass reports them all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rag_eval_assets.errors import InputProblem

BOM = b"\xef\xbb\xbf"
Layout = Literal["jsonl", "array"]


@dataclass(frozen=True)
class Record:
    """One JSON object of the file; `line` is 1-based for JSON Lines and the array index for a JSON array."""

    line: int
    value: dict[str, Any]


@dataclass
class ReadResult:
    layout: Layout
    records: list[Record] = field(default_factory=list)
    problems: list[InputProblem] = field(default_factory=list)


def _reject_constant(name: str) -> None:
    # Python's json accepts NaN and Infinity; JSON does not, and a NaN weight or grade would poison every mean.
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def json_error(exc: ValueError, *, with_line: bool) -> str:
    """The decoder's complaint; its line number only where it helps (inside one JSONL line it is always 1)."""
    if not isinstance(exc, json.JSONDecodeError):
        return str(exc)
    where = f"line {exc.lineno} column {exc.colno}" if with_line else f"column {exc.colno}"
    return f"{exc.msg} ({where})"


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages that speak the user's language."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def read_records(path: Path, file: str) -> ReadResult:
    """Read `path` (named `file` in problems). A file whose first non-blank byte is '[' and that parses
    as one JSON array is an array; anything else is JSON Lines. A file with nothing in it is a problem."""
    data = path.read_bytes()
    if data.startswith(BOM):
        data = data[len(BOM) :]
    result = _read_array(data, file) if data.lstrip().startswith(b"[") else None
    if result is None:
        result = _read_jsonl(data, file)
    if not result.records and not result.problems:
        result.problems.append(InputProblem(file, None, None, "empty file: no questions"))
    return result


def _read_array(data: bytes, file: str) -> ReadResult | None:
    """The array reading of `data`, or None when `data` is JSON Lines whose first line merely is an array."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ReadResult("array", problems=[InputProblem(file, None, None, f"not valid UTF-8: {exc}")])
    try:
        value = parse_json(text)
    except ValueError as exc:
        first_line = text.lstrip().split("\n", 1)[0]
        try:
            parse_json(first_line)
        except ValueError:
            message = f"malformed JSON array: {json_error(exc, with_line=True)}"
            return ReadResult("array", problems=[InputProblem(file, None, None, message)])
        return None
    result = ReadResult("array")
    for index, item in enumerate(value):
        if isinstance(item, dict):
            result.records.append(Record(index, item))
        else:
            result.problems.append(InputProblem(file, index, None, f"expected a JSON object, got {json_type(item)}"))
    return result


def _read_jsonl(data: bytes, file: str) -> ReadResult:
    result = ReadResult("jsonl")
    # Split on b"\n" only: str.splitlines would also break inside a line at U+2028 and friends.
    for number, raw_line in enumerate(data.split(b"\n"), start=1):
        if not raw_line.strip():
            continue
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError as exc:
            result.problems.append(InputProblem(file, number, None, f"not valid UTF-8: {exc}"))
            continue
        try:
            value = parse_json(text)
        except ValueError as exc:
            message = f"malformed JSON: {json_error(exc, with_line=False)}"
            result.problems.append(InputProblem(file, number, None, message))
            continue
        if isinstance(value, dict):
            result.records.append(Record(number, value))
        else:
            result.problems.append(InputProblem(file, number, None, f"expected a JSON object, got {json_type(value)}"))
    return result
