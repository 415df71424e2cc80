"""Which evalset format a path holds, decided from the registered formats' declarations (evalset/registry.py): a
directory by the files it holds, a file by its layout and the keys its records use."""

from __future__ import annotations

from pathlib import Path

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.formats import FORMATS
from rag_eval_assets.evalset.records import ReadResult, Record
from rag_eval_assets.evalset.registry import EvalsetFormat, of_layout


def directory_format(path: Path, file: str) -> EvalsetFormat:
    """The directory format whose files `path` holds. While one directory format is registered it is that one even
    when files are missing, so that its reader names each missing file."""
    formats = of_layout("directory")
    held = [fmt for fmt in formats if all((path / name).is_file() for name in fmt.files)]
    if len(held) == 1:
        return held[0]
    if len(formats) == 1:
        return formats[0]
    needs = "; ".join(f"{fmt.title} needs {' and '.join(fmt.files)}" for fmt in formats)
    which = "several directory formats match" if held else "no directory format matches"
    raise InputError([InputProblem(file, None, None, f"{which}: {needs}; pass the format explicitly")])


def format_of_read(file: str, read: ReadResult, problems: list[InputProblem]) -> str | None:
    """The only format of the read's layout (seed003 for a JSON array); where several share it (JSON Lines), the
    one its valid records point at."""
    formats = of_layout(read.layout)
    if len(formats) == 1:
        return formats[0].name
    # With no valid record, the read problems (or the emptiness) already say why.
    return format_of_records(file, read.records, formats, problems) if read.records else None


def format_of_records(
    file: str, records: list[Record], formats: list[EvalsetFormat], problems: list[InputProblem]
) -> str | None:
    """The one of `formats` the union of the records' keys points at, or None with a problem naming the file."""
    keys = set().union(*(r.value.keys() for r in records))
    types = {r.value["type"] for r in records if isinstance(r.value.get("type"), str)}
    shared = set().union(*(fmt.shared_keys for fmt in formats))
    own = {
        fmt.name: [*sorted(keys & (fmt.marker_keys - shared)), *(f"type={t}" for t in sorted(types & fmt.marker_types))]
        for fmt in formats
    }
    evidence = {name: list(found) for name, found in own.items()}
    for fmt in formats:
        for key in sorted(keys & fmt.marker_keys & shared):
            if not any(own[other.name] for other in formats if key in other.shared_keys):
                evidence[fmt.name].append(key)
    matched = {name: found for name, found in evidence.items() if found}
    if len(matched) == 1:
        return next(iter(matched))
    fallback = [fmt.name for fmt in formats if fmt.fallback_keys and fmt.fallback_keys <= keys]
    if not matched and len(fallback) == 1:
        return fallback[0]
    if matched:
        which = "; ".join(f"{name} ({', '.join(found)})" for name, found in matched.items())
        message = f"keys of contradictory formats: {which}; pass the format explicitly"
    else:
        message = (
            f"unknown format: keys {', '.join(sorted(keys))} match none of {', '.join(FORMATS)}; "
            "pass the format explicitly"
        )
    problems.append(InputProblem(file, None, None, message))
    return None
