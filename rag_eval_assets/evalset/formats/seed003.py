"""Seed 003 question_v2.json: a JSON array of questions with a structured expected answer and a source map."""

from __future__ import annotations

from typing import Any

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.formats.anchors import read_source_map
from rag_eval_assets.evalset.records import Record
from rag_eval_assets.evalset.registry import EvalsetFormat
from rag_eval_assets.evalset.schema import Question, SourceRef

ANSWER_TEXT_FIELDS = ("target_audience", "main_topic", "sub_topic", "original_evidence")
ANSWER_LIST_FIELDS = ("detailed_description", "predicted_questions")


def generated_id(index: int) -> str:
    """The seed's questions carry no id; the array index names them."""
    return f"q{index:04d}"


def parse(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    qid = f.text("id", nonblank=True) if f.given("id") else generated_id(record.line)
    question = f.text("question", required=True, nonblank=True)
    qtype = f.text("type")
    category = f.text("category")
    answer_example: dict[str, Any] | None = None
    source_map: tuple[SourceRef, ...] = ()
    expected = f.obj_field("expected", required=True)
    if expected is not None:
        answer = expected.obj_field("answer_example", required=True)
        if answer is not None:
            for name in ANSWER_TEXT_FIELDS:
                answer.text(name, required=True)
            for name in ANSWER_LIST_FIELDS:
                answer.texts(name, required=True)
            answer_example = answer.obj
        source_map = read_source_map(expected, required=True)
    return FORMAT.question(
        file,
        record,
        qid,
        question,
        type=qtype,
        category=category,
        answer_example=answer_example,
        source_map=source_map,
    )


FORMAT = EvalsetFormat("seed003", "array", parse=parse)
