"""load_evalset: any seed format or a BEIR directory into the one Question schema, every problem at once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.checks import duplicate_id_problems, in_reading_order
from rag_eval_assets.evalset.detect import directory_format, format_of_read
from rag_eval_assets.evalset.formats import FORMATS
from rag_eval_assets.evalset.records import read_records
from rag_eval_assets.evalset.registry import LAYOUT_NAMES
from rag_eval_assets.evalset.schema import Question


@dataclass(frozen=True)
class LoadResult:
    """The questions, the format they were read as, and warnings that did not stop the load."""

    questions: list[Question]
    format: str
    warnings: list[str]


def load_evalset(path: str | Path, format: str | None = None) -> list[Question]:
    """The questions at `path`, in file order. `format` (one of FORMATS) skips detection."""
    return load_evalset_with_warnings(path, format).questions


def load_evalset_with_warnings(path: str | Path, format: str | None = None) -> LoadResult:
    """As load_evalset, with the format used and the warnings (BEIR queries dropped for lack of qrels)."""
    file = str(path)
    p = Path(path)
    if format is not None and format not in FORMATS:
        message = f"unknown format {format!r}; valid formats: {', '.join(FORMATS)}"
        raise InputError([InputProblem(file, None, None, message)])
    if not p.exists():
        raise InputError([InputProblem(file, None, None, "no such file or directory")])
    if p.is_dir():
        fmt = FORMATS[format] if format else directory_format(p, file)
        if fmt.layout != "directory":
            raise InputError([InputProblem(file, None, None, f"format {format} reads a file, got a directory")])
        questions, warnings = fmt.load(p, file)
        return LoadResult(questions, fmt.name, warnings)
    if format is not None and FORMATS[format].layout == "directory":
        message = f"format {format} reads {FORMATS[format].reads}, got a file"
        raise InputError([InputProblem(file, None, None, message)])

    read = read_records(p, file)
    problems = list(read.problems)
    found = format or format_of_read(file, read, problems)
    if found is not None and FORMATS[found].layout != read.layout:
        message = f"format {found} reads {FORMATS[found].reads}, got {LAYOUT_NAMES[read.layout]}"
        problems.append(InputProblem(file, None, None, message))
        found = None
    if found is None:
        raise InputError(in_reading_order(problems))
    parse = FORMATS[found].parse
    questions = [q for q in (parse(file, r, problems) for r in read.records) if q is not None]
    position = "index" if read.layout == "array" else "line"
    problems.extend(duplicate_id_problems(questions, file, "id", position))
    if problems:
        raise InputError(in_reading_order(problems))
    return LoadResult(questions, found, [])
