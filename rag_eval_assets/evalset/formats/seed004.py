"""Seed 004 generated queries: question, answer and the chunks it was generated from, typed literal /
paraphrase / scenario; optional anchors (seed 002 gold_supports, seed 003 source_map) outlive re-chunking."""

from __future__ import annotations

import hashlib

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.formats.anchors import read_gold_supports, read_source_map
from rag_eval_assets.evalset.records import Record
from rag_eval_assets.evalset.registry import EvalsetFormat
from rag_eval_assets.evalset.schema import Question

TYPES = ("literal", "paraphrase", "scenario")


def generated_id(question: str) -> str:
    """Generated queries often have no id; one derived from the text stays the same on every load."""
    return "gen-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:12]


def parse(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    question = f.text("question", required=True, nonblank=True)
    if f.given("id"):
        qid = f.text("id", nonblank=True)
    else:
        qid = None if question is None else generated_id(question)
    answer = f.text("answer", required=True, nonblank=True)
    chunk_ids = f.texts("relevant_chunk_ids", required=True, nonblank=True)
    qtype = f.choice("type", TYPES, required=True)
    gold_supports = read_gold_supports(f)
    source_map = read_source_map(f)
    if record.value.get("relevant_chunk_ids") == [] and not gold_supports and not source_map:
        f.problem("relevant_chunk_ids", "no gold: give at least one chunk id, gold_supports or source_map entry")
    return FORMAT.question(
        file,
        record,
        qid,
        question,
        gold_chunk_ids=chunk_ids,
        type=qtype,
        gold_supports=gold_supports,
        source_map=source_map,
        reference_answer=answer,
    )


FORMAT = EvalsetFormat(
    "seed004",
    "jsonl",
    parse=parse,
    marker_keys=frozenset({"relevant_chunk_ids", "answer", "source_map"}),
    marker_types=frozenset(TYPES),
    shared_keys=frozenset({"gold_supports"}),
)
