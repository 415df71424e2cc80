"""BEIR collections: a directory with queries.jsonl and graded qrels (qrels.tsv or qrels/test.tsv).

As in BEIR, only judged queries are evaluated: a query with no qrels row of grade > 0 is dropped and
the drop is reported as a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.checks import duplicate_id_problems, in_reading_order
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.records import BOM, Record, read_records
from rag_eval_assets.evalset.registry import EvalsetFormat
from rag_eval_assets.evalset.schema import Question

QUERIES = "queries.jsonl"
QRELS_CANDIDATES = ("qrels.tsv", "qrels/test.tsv")
QRELS_HEADER = ("query-id", "corpus-id", "score")
QRELS_HEADER_TEXT = "\t".join(QRELS_HEADER)
SHOWN_DROPPED_IDS = 10


def qrels_paths(directory: Path) -> list[str]:
    """The qrels files present in `directory`, as relative POSIX paths in a fixed order."""
    return [rel for rel in QRELS_CANDIDATES if (directory / rel).is_file()]


def load_beir(directory: Path, file: str) -> tuple[list[Question], list[str]]:
    """Questions of the BEIR collection in `directory` (named `file` in problems) and the warnings."""
    qrels_rels = qrels_paths(directory)
    problems: list[InputProblem] = []
    if not (directory / QUERIES).is_file():
        problems.append(InputProblem(file, None, None, f"a BEIR directory needs {QUERIES}"))
    if len(qrels_rels) != 1:
        found = "neither" if not qrels_rels else "both"
        message = f"a BEIR directory needs exactly one of {' or '.join(QRELS_CANDIDATES)}; found {found}"
        problems.append(InputProblem(file, None, None, message))
    if problems:
        raise InputError(problems)

    queries_file = str(Path(file) / QUERIES)
    queries, known = _read_queries(directory / QUERIES, queries_file, problems)
    qrels_file = str(Path(file) / qrels_rels[0])
    qrels = _read_qrels(directory / qrels_rels[0], qrels_file, known, problems)

    judged = [replace(q, qrels=qrels.get(q.id, {}), gold_doc_ids=_positive(qrels.get(q.id, {}))) for q in queries]
    kept = [q for q in judged if q.gold_doc_ids]
    if queries and not kept and not problems:
        problems.append(InputProblem(qrels_file, None, None, "no query has a qrels row with score > 0"))
    if problems:
        raise InputError(in_reading_order(problems))
    return kept, _drop_warnings(queries_file, judged)


def version_files(directory: Path) -> list[str]:
    """The files whose bytes are the collection's version: queries.jsonl, then each qrels file present."""
    return [QUERIES, *qrels_paths(directory)]


FORMAT = EvalsetFormat(
    "beir",
    "directory",
    load=load_beir,
    files=(QUERIES,),
    contents=version_files,
    title="BEIR",
    holds="queries.jsonl and qrels",
)


def _positive(grades: dict[str, int]) -> tuple[str, ...]:
    return tuple(doc for doc, grade in grades.items() if grade > 0)


def _drop_warnings(queries_file: str, judged: list[Question]) -> list[str]:
    dropped = [q.id for q in judged if not q.gold_doc_ids]
    if not dropped:
        return []
    shown = ", ".join(dropped[:SHOWN_DROPPED_IDS]) + (", ..." if len(dropped) > SHOWN_DROPPED_IDS else "")
    return [
        f"{queries_file}: dropped {len(dropped)} of {len(judged)} queries that have no qrels row with score > 0 "
        f"(BEIR evaluates judged queries only): {shown}"
    ]


def _read_queries(path: Path, file: str, problems: list[InputProblem]) -> tuple[list[Question], set[str]]:
    """The queries and every _id named in the file, so a qrels row of a query with a bad field is not unknown."""
    read = read_records(path, file)
    problems.extend(read.problems)
    if read.layout == "array":
        problems.append(InputProblem(file, None, None, "expected JSON Lines, got a JSON array"))
        return [], set()
    queries = [q for q in (_query(file, r, problems) for r in read.records) if q is not None]
    problems.extend(duplicate_id_problems(queries, file, "_id", "line"))
    return queries, {r.value["_id"] for r in read.records if isinstance(r.value.get("_id"), str)}


def _query(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    qid = f.text("_id", required=True, nonblank=True)
    text = f.text("text", required=True, nonblank=True)
    answers = f.texts("answers")
    return FORMAT.question(
        file,
        record,
        qid,
        text,
        reference_answer=answers[0] if answers else None,
    )


def _read_qrels(path: Path, file: str, known: set[str], problems: list[InputProblem]) -> dict[str, dict[str, int]]:
    """query-id -> {corpus-id: grade}, in file order. With no known ids (queries unreadable) ids go unchecked."""
    rows = _tsv_rows(path, file, problems)
    header = next(rows, None)
    if header is None:
        problems.append(InputProblem(file, None, None, "empty file: no qrels"))
        return {}
    if tuple(header[1]) != QRELS_HEADER:
        problems.append(InputProblem(file, header[0], None, f"expected the header {QRELS_HEADER_TEXT!r}"))
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, columns in rows:
        judgment = _judgment(file, number, columns, known, problems)
        if judgment is None:
            continue
        query_id, doc_id, grade = judgment
        first = first_line.setdefault((query_id, doc_id), number)
        if first != number:
            message = f"duplicate judgment of {doc_id!r} for {query_id!r} (first at line {first})"
            problems.append(InputProblem(file, number, "corpus-id", message))
            continue
        qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def _tsv_rows(path: Path, file: str, problems: list[InputProblem]) -> Iterator[tuple[int, list[str]]]:
    """(1-based line, columns) of every non-blank line."""
    data = path.read_bytes()
    if data.startswith(BOM):
        data = data[len(BOM) :]
    for number, raw_line in enumerate(data.split(b"\n"), start=1):
        if not raw_line.strip():
            continue
        try:
            yield number, raw_line.decode("utf-8").rstrip("\r").split("\t")
        except UnicodeDecodeError as exc:
            problems.append(InputProblem(file, number, None, f"not valid UTF-8: {exc}"))


def _judgment(
    file: str, number: int, columns: list[str], known: set[str], problems: list[InputProblem]
) -> tuple[str, str, int] | None:
    if len(columns) != len(QRELS_HEADER):
        problems.append(InputProblem(file, number, None, f"expected 3 tab-separated columns, got {len(columns)}"))
        return None
    query_id, doc_id, score = columns
    before = len(problems)
    if known and query_id not in known:
        problems.append(InputProblem(file, number, "query-id", f"unknown query id {query_id!r}"))
    if not doc_id.strip():
        problems.append(InputProblem(file, number, "corpus-id", "must not be empty"))
    try:
        grade = int(score)
    except ValueError:
        problems.append(InputProblem(file, number, "score", f"expected an integer grade, got {score!r}"))
        return None
    return None if len(problems) > before else (query_id, doc_id, grade)
