"""Human grades of judged answers (issue 23): what a person gave an answer on a judge's own scale, kept in
`EVALSET.grades.jsonl` beside the evalset (judging/graded.py matches them to a run's judgements).

A grade is keyed by question id, judge metric and the sha256 of the judge's input (the chat messages the judge was
sent: its instructions, the question, the context, the answer and, for correctness, the reference). A later run
that puts the same input before the judge gets the grade again, whatever its retriever or k; a changed answer,
context, question, reference or judge prompt does not.

One JSON object a line: query_id, judge, judge_input_sha256, grade (the key and the person's grade), then what the
grade was given against: judge_prompt_version, judge_model, judge_score, run_id, retriever, k, graded_at (UTC).
Nothing about who graded is recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.generation.judges import JUDGES
from rag_eval_assets.generation.prompts import JUDGE_PROMPTS
from rag_eval_assets.atomic_file import write_atomically

SUFFIX = ".grades.jsonl"
# A grade further than this from the judge's score is a disagreement (`--only disagreements`): on a 0-5 scale a
# one-point difference is a judgement call, two points are a different verdict.
DISAGREEMENT_POINTS = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class GradeKey:
    query_id: str
    judge: str
    judge_input_sha256: str


@dataclass(frozen=True)
class Grade:
    query_id: str
    judge: str
    judge_input_sha256: str
    grade: int
    judge_prompt_version: str
    judge_model: str | None = None
    judge_score: float | None = None
    run_id: str | None = None
    retriever: str | None = None
    k: int | None = None
    graded_at: str | None = None

    @property
    def key(self) -> GradeKey:
        return GradeKey(self.query_id, self.judge, self.judge_input_sha256)


def grades_path(evalset: Path) -> Path:
    return evalset.with_name(evalset.name + SUFFIX)


def judge_scale(judge: str, prompt_version: str) -> tuple[int, ...]:
    """The scores the judge may give (its reply schema's): the scale a person grades on."""
    schema = JUDGE_PROMPTS[prompt_version][judge][1]
    return tuple(schema["properties"]["score"]["enum"])


def judge_definition(judge: str, prompt_version: str) -> str:
    """What the judge is told the metric means: its prompt's instructions."""
    return JUDGE_PROMPTS[prompt_version][judge][0].system


def disagrees(grade: int, judge_score: float) -> bool:
    return abs(grade - judge_score) > DISAGREEMENT_POINTS


def load_grades(path: Path) -> dict[GradeKey, Grade]:
    """The grades in `path` (none when it does not exist); InputError naming the line and field of every bad one."""
    if not path.exists():
        return {}
    grades: dict[GradeKey, Grade] = {}
    first_line: dict[GradeKey, int] = {}
    problems: list[InputProblem] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(InputProblem(str(path), number, None, f"invalid JSON: {exc.msg}"))
            continue
        found = _problems(record)
        if found:
            problems += [InputProblem(str(path), number, name, message) for name, message in found]
            continue
        grade = Grade(**{name: record.get(name) for name in Grade.__dataclass_fields__})
        if grade.key in grades:
            problems.append(InputProblem(str(path), number, "judge_input_sha256",
                                         f"a second grade of {grade.query_id} {grade.judge} for the same judge input "
                                         f"(the first is on line {first_line[grade.key]})"))
            continue
        grades[grade.key], first_line[grade.key] = grade, number
    if problems:
        raise InputError(problems)
    return grades


def _problems(record: Any) -> list[tuple[str | None, str]]:
    if not isinstance(record, dict):
        return [(None, f"expected a JSON object, got {type(record).__name__}")]
    found: list[tuple[str | None, str]] = []
    unknown = sorted(set(record) - set(Grade.__dataclass_fields__))
    found += [(name, "unknown field") for name in unknown]
    if not isinstance(record.get("query_id"), str) or not record["query_id"]:
        found.append(("query_id", "missing or not a non-empty string"))
    judge, version = record.get("judge"), record.get("judge_prompt_version")
    if judge not in JUDGES:
        found.append(("judge", f"expected one of {', '.join(JUDGES)}, got {judge!r}"))
    if version not in JUDGE_PROMPTS:
        found.append(("judge_prompt_version", f"expected one of {', '.join(JUDGE_PROMPTS)}, got {version!r}"))
    if not isinstance(record.get("judge_input_sha256"), str) or not _SHA256.fullmatch(record["judge_input_sha256"]):
        found.append(("judge_input_sha256", "missing or not 64 lowercase hex digits"))
    grade = record.get("grade")
    if judge in JUDGES and version in JUDGE_PROMPTS:
        scale = judge_scale(judge, version)
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in scale:
            found.append(("grade", f"expected an integer {min(scale)}-{max(scale)}, got {grade!r}"))
    return found


def save_grades(path: Path, grades: Iterable[Grade]) -> None:
    """Write every grade to `path` at once (atomically), in a stable order so that the file diffs well."""
    ordered = sorted(grades, key=lambda g: (g.query_id, g.judge, g.judge_input_sha256))
    text = "".join(json.dumps(asdict(g), ensure_ascii=False) + "\n" for g in ordered)
    write_atomically(path, text.encode("utf-8"))
