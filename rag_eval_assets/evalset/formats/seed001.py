"""Seed 001 evalset.jsonl: retrieval labels (gold_doc_ids / gold_chunk_ids) with definition / fact / negative."""

from __future__ import annotations

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.records import Record
from rag_eval_assets.evalset.registry import EvalsetFormat
from rag_eval_assets.evalset.schema import Question

TYPES = ("definition", "fact", "negative")


def parse(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    qid = f.text("id", required=True, nonblank=True)
    question = f.text("question", required=True, nonblank=True)
    qtype = f.choice("type", TYPES, required=True)
    negative = qtype == "negative"
    # Negatives carry no gold; every other question needs its documents (seed 001: required for non-negative).
    gold_doc_ids = f.texts("gold_doc_ids", required=qtype is not None and not negative, nonblank=True)
    gold_chunk_ids = f.texts("gold_chunk_ids", nonblank=True)
    notes = f.text("notes")
    source = f.text("source")
    if negative:
        for name, gold in (("gold_doc_ids", gold_doc_ids), ("gold_chunk_ids", gold_chunk_ids)):
            if gold:
                f.problem(name, "a negative question must have no gold")
    elif qtype is not None and record.value.get("gold_doc_ids") == []:
        f.problem("gold_doc_ids", f"a {qtype} question needs at least one gold document")
    return FORMAT.question(
        file,
        record,
        qid,
        question,
        gold_doc_ids=gold_doc_ids,
        gold_chunk_ids=gold_chunk_ids,
        type=qtype,
        notes=notes,
        source=source,
        answerable=not negative,
    )


FORMAT = EvalsetFormat(
    "seed001",
    "jsonl",
    parse=parse,
    marker_keys=frozenset({"gold_doc_ids", "gold_chunk_ids"}),
    marker_types=frozenset(TYPES),
)
