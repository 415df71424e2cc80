"""BEIR corpus.jsonl: one document per line with _id, title and text."""

from __future__ import annotations

import json
from pathlib import Path

from rag_eval_assets.corpus.model import Document, Section
from rag_eval_assets.corpus.text import read_utf8
from rag_eval_assets.errors import InputError, InputProblem


def load_beir_corpus(path: Path) -> list[Document]:
    """Every line of a BEIR corpus.jsonl as a one-Section Document (doc_id = rel_path = _id).

    The text is title + blank line + text when the title is non-empty, so title words are
    retrievable as in BEIR's own evaluation. Documents with empty text are kept (Cranfield has
    some): the chunker gives them no chunk. Blank lines are skipped. Every problem (bad JSON,
    missing or non-string _id, duplicate _id, non-string title or text) is reported at once.
    """
    file = str(path)
    problems = []
    documents = []
    first_line_of: dict[str, int] = {}
    for line_number, line in enumerate(read_utf8(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(InputProblem(file, line_number, None, f"invalid JSON: {e.msg} (column {e.colno})"))
            continue
        if not isinstance(record, dict):
            problems.append(InputProblem(file, line_number, None, "expected a JSON object"))
            continue

        doc_id = record.get("_id")
        title = record.get("title", "")
        text = record.get("text")
        line_problems = []
        if not isinstance(doc_id, str) or not doc_id:
            line_problems.append(InputProblem(file, line_number, "_id", f"must be a non-empty string, got {doc_id!r}"))
        elif doc_id in first_line_of:
            message = f"duplicate _id {doc_id!r} (first on line {first_line_of[doc_id]})"
            line_problems.append(InputProblem(file, line_number, "_id", message))
        else:
            first_line_of[doc_id] = line_number
        if not isinstance(title, str):
            line_problems.append(InputProblem(file, line_number, "title", f"must be a string, got {title!r}"))
        if not isinstance(text, str):
            line_problems.append(InputProblem(file, line_number, "text", f"must be a string, got {text!r}"))
        if line_problems:
            problems.extend(line_problems)
            continue

        full_text = f"{title}\n\n{text}" if title else text
        section = Section(heading_path="", page=None, text=full_text, char_start=0)
        documents.append(Document(doc_id=doc_id, rel_path=doc_id, title=title, kind="beir", sections=(section,)))
    if problems:
        raise InputError(problems)
    return documents
