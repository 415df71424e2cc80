"""One record parser per seed format; BEIR, a directory, has its own loader in beir.py.

A parser records every problem of its record and returns a Question whenever the id is readable, even
with other fields bad, so duplicate ids are still found; the loader raises before such a Question escapes.
"""

from __future__ import annotations

from collections.abc import Callable

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.formats import seed000, seed001, seed002, seed003, seed004
from rag_eval_assets.evalset.records import Layout, Record
from rag_eval_assets.evalset.schema import Question

RecordParser = Callable[[str, Record, list[InputProblem]], Question | None]

RECORD_PARSERS: dict[str, RecordParser] = {
    "seed000": seed000.parse,
    "seed001": seed001.parse,
    "seed002": seed002.parse,
    "seed003": seed003.parse,
    "seed004": seed004.parse,
}
LAYOUTS: dict[str, Layout] = {
    "seed000": "jsonl",
    "seed001": "jsonl",
    "seed002": "jsonl",
    "seed003": "array",
    "seed004": "jsonl",
}
