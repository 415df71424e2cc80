"""Seed 000 questions.jsonl: rule-scored questions (must_include / must_include_any / must_not_include)."""

from __future__ import annotations

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.records import Record
from rag_eval_assets.evalset.registry import EvalsetFormat
from rag_eval_assets.evalset.schema import Question


def parse(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    qid = f.text("id", required=True, nonblank=True)
    question = f.text("question", required=True, nonblank=True)
    must_include = f.texts("must_include", nonblank=True)
    must_include_any = f.string_groups("must_include_any")
    must_not_include = f.texts("must_not_include", nonblank=True)
    require_citation = f.boolean("require_citation", False)
    weight = f.positive_number("weight", 1.0)
    return FORMAT.question(
        file,
        record,
        qid,
        question,
        must_include=must_include,
        must_include_any=must_include_any,
        must_not_include=must_not_include,
        require_citation=require_citation,
        weight=weight,
    )


FORMAT = EvalsetFormat(
    "seed000",
    "jsonl",
    parse=parse,
    marker_keys=frozenset({"must_include", "must_include_any", "must_not_include", "require_citation", "weight"}),
)
