"""The one question schema every evalset format loads into.

Each seed's fields are kept under the seed's own name; a field a format does not have keeps its
default. `raw` holds the original record verbatim so nothing in the user's file is lost.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class GoldSupport:
    """Seed 002 anchor: exact rel_path, heading_path prefix, optional snippets (any one must occur)."""

    rel_path: str
    heading_path: str = ""
    snippets: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceRef:
    """Seed 003 expected.source_map entry: file, optional page, anchors (any one must occur)."""

    file: str
    page: int | None = None
    anchors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    format: str
    source_file: str = ""
    source_line: int | None = None
    # seed 000: rule score
    must_include: tuple[str, ...] = ()
    must_include_any: tuple[tuple[str, ...], ...] = ()  # OR-groups; a bare string is a group of one
    must_not_include: tuple[str, ...] = ()
    require_citation: bool = False
    weight: float = 1.0
    # seed 001: retrieval labels
    gold_doc_ids: tuple[str, ...] = ()
    gold_chunk_ids: tuple[str, ...] = ()
    type: str | None = None
    notes: str | None = None
    source: str | None = None
    # seed 002: anchors, abstention, slices
    answerable: bool = True
    expected_key_facts: tuple[str, ...] = ()
    gold_supports: tuple[GoldSupport, ...] = ()
    required_support_groups: tuple[tuple[int, ...], ...] | None = None
    recency_conflict_rule: str | None = None
    tags: tuple[str, ...] = ()
    vaults: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    category: str | None = None
    difficulty: str | None = None
    # seed 003: structured JSON answers
    answer_example: dict[str, Any] | None = None
    source_map: tuple[SourceRef, ...] = ()
    # seed 004 reference answer (also BEIR/XQuAD answers[0])
    reference_answer: str | None = None
    # BEIR graded qrels: doc_id -> grade
    qrels: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_negative(self) -> bool:
        return self.type == "negative" or not self.answerable


# Columns whose values are nested structures; they are stored in Parquet as JSON text.
JSON_COLUMNS = (
    "must_include",
    "must_include_any",
    "must_not_include",
    "gold_doc_ids",
    "gold_chunk_ids",
    "expected_key_facts",
    "gold_supports",
    "required_support_groups",
    "tags",
    "vaults",
    "folders",
    "answer_example",
    "source_map",
    "qrels",
    "raw",
)
COLUMNS = tuple(f.name for f in fields(Question))


def question_to_row(q: Question) -> dict[str, Any]:
    row = asdict(q)
    for name in JSON_COLUMNS:
        row[name] = json.dumps(row[name], ensure_ascii=False, sort_keys=True)
    return row


def question_from_row(row: dict[str, Any]) -> Question:
    values = dict(row)
    for name in JSON_COLUMNS:
        values[name] = json.loads(values[name])
    values["must_include"] = tuple(values["must_include"])
    values["must_include_any"] = tuple(tuple(g) for g in values["must_include_any"])
    values["must_not_include"] = tuple(values["must_not_include"])
    values["gold_doc_ids"] = tuple(values["gold_doc_ids"])
    values["gold_chunk_ids"] = tuple(values["gold_chunk_ids"])
    values["expected_key_facts"] = tuple(values["expected_key_facts"])
    values["gold_supports"] = tuple(
        GoldSupport(s["rel_path"], s["heading_path"], tuple(s["snippets"])) for s in values["gold_supports"]
    )
    groups = values["required_support_groups"]
    values["required_support_groups"] = None if groups is None else tuple(tuple(g) for g in groups)
    values["tags"] = tuple(values["tags"])
    values["vaults"] = tuple(values["vaults"])
    values["folders"] = tuple(values["folders"])
    values["source_map"] = tuple(SourceRef(s["file"], s["page"], tuple(s["anchors"])) for s in values["source_map"])
    for name in ("source_line",):
        if values[name] is not None and values[name] != values[name]:  # NaN from a nullable column
            values[name] = None
        elif values[name] is not None:
            values[name] = int(values[name])
    values["weight"] = float(values["weight"])
    values["require_citation"] = bool(values["require_citation"])
    values["answerable"] = bool(values["answerable"])
    return Question(**values)
