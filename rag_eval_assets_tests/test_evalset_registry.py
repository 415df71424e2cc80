"""A format registered from outside the package: detection, loading and the format list read its declaration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.formats import FORMATS
from rag_eval_assets.evalset.load import load_evalset, load_evalset_with_warnings
from rag_eval_assets.evalset.records import Record
from rag_eval_assets.evalset.registry import EvalsetFormat, register
from rag_eval_assets.evalset.schema import Question

FAQ_RECORDS = [
    {"faq_id": "f1", "q": "How do I reset my password?", "a": "Use the login page.", "doc": "help/login.md"},
    {"faq_id": "f2", "q": "Where are invoices?", "a": "Under billing.", "doc": "help/billing.md"},
]


def parse_faq(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    qid = f.text("faq_id", required=True, nonblank=True)
    question = f.text("q", required=True, nonblank=True)
    answer = f.text("a")
    doc = f.text("doc", required=True, nonblank=True)
    if qid is None:
        return None
    return Question(id=qid, question=question or "", format="faq", source_file=file, source_line=record.line,
                    reference_answer=answer, gold_doc_ids=(doc,) if doc else (), raw=record.value)


FAQ = EvalsetFormat("faq", "jsonl", parse=parse_faq, marker_keys=frozenset({"faq_id"}))


@pytest.fixture
def faq_format():
    register(FAQ)
    yield
    FORMATS.pop("faq")


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_registered_format_is_detected_and_loaded(tmp_path: Path, faq_format) -> None:
    path = write_jsonl(tmp_path / "faq.jsonl", FAQ_RECORDS)
    assert load_evalset_with_warnings(path).format == "faq"
    loaded = load_evalset_with_warnings(path)
    assert loaded.format == "faq"
    assert [(q.id, q.question, q.reference_answer, q.gold_doc_ids, q.source_line) for q in loaded.questions] == [
        ("f1", "How do I reset my password?", "Use the login page.", ("help/login.md",), 1),
        ("f2", "Where are invoices?", "Under billing.", ("help/billing.md",), 2),
    ]
    # Its markers weigh like any other format's: beside seed 001's they contradict.
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [FAQ_RECORDS[0], {"id": "x", "question": "y", "gold_doc_ids": ["d"]}])
    with pytest.raises(InputError) as caught:
        load_evalset(mixed)
    assert caught.value.problems[0].message == (
        "keys of contradictory formats: seed001 (gold_doc_ids); faq (faq_id); pass the format explicitly"
    )
    # Named explicitly, its parser reports bad fields like the built-in ones.
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"faq_id": "f1", "q": "?"}])
    with pytest.raises(InputError) as caught:
        load_evalset(bad, format="faq")
    assert [(p.line, p.field, p.message) for p in caught.value.problems] == [(1, "doc", "required field is missing")]
    with pytest.raises(InputError) as caught:
        load_evalset(path, format="nope")
    assert caught.value.problems[0].message == (
        "unknown format 'nope'; valid formats: seed000, seed001, seed002, seed003, seed004, beir, faq"
    )


def test_an_unregistered_format_is_unknown_again(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "faq.jsonl", FAQ_RECORDS)
    register(FAQ)
    try:
        assert load_evalset_with_warnings(path).format == "faq"
    finally:
        FORMATS.pop("faq")
    with pytest.raises(InputError) as caught:
        load_evalset(path)
    assert caught.value.problems[0].message == (
        "unknown format: keys a, doc, faq_id, q match none of seed000, seed001, seed002, seed003, seed004, beir; "
        "pass the format explicitly"
    )
