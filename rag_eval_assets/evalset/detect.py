"""Which evalset format a path holds, decided from its shape and the keys its records use."""

from __future__ import annotations

from pathlib import Path

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.formats import seed001, seed004
from rag_eval_assets.evalset.formats.beir import QUERIES
from rag_eval_assets.evalset.records import ReadResult, Record, read_records
from rag_eval_assets.evalset.schema import FORMATS

# Keys only one JSON Lines format uses. Keys several formats share (id, question, type, tags, category,
# notes, ...) decide nothing; gold_supports is handled apart because seed 004 may carry it too.
MARKER_KEYS: dict[str, frozenset[str]] = {
    "seed000": frozenset({"must_include", "must_include_any", "must_not_include", "require_citation", "weight"}),
    "seed001": frozenset({"gold_doc_ids", "gold_chunk_ids"}),
    "seed002": frozenset({"answerable", "expected_key_facts", "required_support_groups", "recency_conflict_rule"}),
    "seed004": frozenset({"relevant_chunk_ids", "answer", "source_map"}),
}
MARKER_TYPES: dict[str, frozenset[str]] = {
    "seed001": frozenset(seed001.TYPES),
    "seed004": frozenset(seed004.TYPES),
}
SHARED_ANCHOR_KEY = "gold_supports"


def detect_format(path: str | Path) -> str:
    """The format of the evalset at `path`; InputError naming the file when it cannot be told."""
    file = str(path)
    p = Path(path)
    if not p.exists():
        raise InputError([InputProblem(file, None, None, "no such file or directory")])
    if p.is_dir():
        if not (p / QUERIES).is_file():
            raise InputError([InputProblem(file, None, None, f"a directory is read as BEIR and needs {QUERIES}")])
        return "beir"
    read = read_records(p, file)
    problems = list(read.problems)
    found = format_of_read(file, read, problems)
    if found is None:
        raise InputError(problems)
    return found


def format_of_read(file: str, read: ReadResult, problems: list[InputProblem]) -> str | None:
    """seed003 for a JSON array; for JSON Lines, the format its valid records point at."""
    if read.layout == "array":
        return "seed003"
    # With no valid record, the read problems (or the emptiness) already say why.
    return format_of_records(file, read.records, problems) if read.records else None


def format_of_records(file: str, records: list[Record], problems: list[InputProblem]) -> str | None:
    """The JSON Lines format the union of the records' keys points at, or None with a problem naming the file."""
    keys = set().union(*(r.value.keys() for r in records))
    types = {r.value["type"] for r in records if isinstance(r.value.get("type"), str)}
    evidence = {name: sorted(keys & markers) for name, markers in MARKER_KEYS.items()}
    for name, markers in MARKER_TYPES.items():
        evidence[name].extend(f"type={t}" for t in sorted(types & markers))
    if SHARED_ANCHOR_KEY in keys and not evidence["seed004"]:
        evidence["seed002"].append(SHARED_ANCHOR_KEY)
    matched = {name: found for name, found in evidence.items() if found}
    if len(matched) == 1:
        return next(iter(matched))
    if not matched and {"id", "question"} <= keys:
        # A plain list of questions is a seed 002 evalset with no gold yet: what `rag-eval label` starts from.
        return "seed002"
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
