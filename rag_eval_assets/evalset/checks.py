"""Checks across the records of one file."""

from __future__ import annotations

from collections.abc import Iterable

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.schema import Question


def duplicate_id_problems(questions: Iterable[Question], file: str, field: str, position: str) -> list[InputProblem]:
    """One problem per repeated id, at the repeat, naming where the id was first seen (`position`: line/index)."""
    first: dict[str, int | None] = {}
    problems = []
    for q in questions:
        if q.id in first:
            where = f"{position} {first[q.id]}"
            problems.append(InputProblem(file, q.source_line, field, f"duplicate id {q.id!r} (first at {where})"))
        else:
            first[q.id] = q.source_line
    return problems


def in_reading_order(problems: list[InputProblem]) -> list[InputProblem]:
    """Per file, whole-file problems first, then by line; a line keeps the order its fields were checked in."""
    return sorted(problems, key=lambda p: (p.file, p.line is not None, p.line or 0))
