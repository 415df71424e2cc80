"""Bad evalset input: every problem is reported at once, each at its exact file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.load import load_evalset

Where = tuple[str, int | None, str | None]  # (file relative to tmp_path, line, field)

OK0 = '{"id": "q1", "question": "Сколько?"}'
OK1 = '{"id": "f1", "question": "q?", "gold_doc_ids": ["d1"], "type": "fact"}'
OK2 = '{"id": "t1", "question": "q?", "answerable": true, "gold_supports": [{"rel_path": "a.md"}]}'
OK4 = '{"question": "q?", "answer": "a", "relevant_chunk_ids": ["c1"], "type": "literal"}'
ANSWER = {
    "target_audience": "a",
    "main_topic": "b",
    "sub_topic": "c",
    "detailed_description": ["d"],
    "original_evidence": "e",
    "predicted_questions": [],
}
QRELS_HEADER = "query-id\tcorpus-id\tscore\n"
BEIR_QUERIES = '{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n'


def seed003_item(**changes: object) -> dict:
    item: dict = {"question": "q?", "expected": {"answer_example": dict(ANSWER), "source_map": []}}
    item.update(changes)
    return item


def lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


# (case id, files {relative path: content}, path loaded, explicit format, expected problems in order)
CASES: list[tuple[str, dict[str, str | bytes], str, str | None, list[Where]]] = [
    ("malformed json", {"q.jsonl": lines(OK0, '{"id": "q2", "question": ')}, "q.jsonl", None, [("q.jsonl", 2, None)]),
    ("json not an object", {"q.jsonl": lines(OK0, '["q2", "x"]')}, "q.jsonl", None, [("q.jsonl", 2, None)]),
    (
        "NaN is not JSON",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "weight": NaN}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, None)],
    ),
    (
        "invalid utf-8",
        {"q.jsonl": OK0.encode() + b'\n{"id": "q2", "question": "\xff"}\n'},
        "q.jsonl",
        None,
        [("q.jsonl", 2, None)],
    ),
    ("missing id", {"q.jsonl": lines(OK0, '{"question": "x"}')}, "q.jsonl", None, [("q.jsonl", 2, "id")]),
    ("missing question", {"q.jsonl": lines(OK0, '{"id": "q2"}')}, "q.jsonl", None, [("q.jsonl", 2, "question")]),
    (
        "whitespace question",
        {"q.jsonl": lines('{"id": "q1", "question": " \\t "}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "question")],
    ),
    ("id not a string", {"q.jsonl": lines(OK0, '{"id": 2, "question": "x"}')}, "q.jsonl", None, [("q.jsonl", 2, "id")]),
    (
        "weight high",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "weight": "high"}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "weight")],
    ),
    (
        "weight zero",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "weight": 0}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "weight")],
    ),
    (
        "weight boolean",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "weight": true}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "weight")],
    ),
    (
        "must_include a string",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "must_include": "2023"}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "must_include")],
    ),
    (
        "must_include item",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "must_include": ["a", 7]}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "must_include[1]")],
    ),
    (
        "must_not_include empty",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "must_not_include": [""]}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "must_not_include[0]")],
    ),
    (
        "must_include_any groups",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "must_include_any": ["a", [], ["b", 1], {"c": 1}]}')},
        "q.jsonl",
        None,
        [
            ("q.jsonl", 1, "must_include_any[1]"),
            ("q.jsonl", 1, "must_include_any[2][1]"),
            ("q.jsonl", 1, "must_include_any[3]"),
        ],
    ),
    (
        "require_citation yes",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "require_citation": "yes"}')},
        "q.jsonl",
        None,
        [("q.jsonl", 1, "require_citation")],
    ),
    (
        "duplicate id",
        {"q.jsonl": lines(OK0, '{"id": "q2", "question": "x"}', OK0)},
        "q.jsonl",
        None,
        [("q.jsonl", 3, "id")],
    ),
    (
        "seed001 bad type",
        {"e.jsonl": lines(OK1, '{"id": "f2", "question": "q?", "gold_doc_ids": ["d"], "type": "opinion"}')},
        "e.jsonl",
        None,
        [("e.jsonl", 2, "type")],
    ),
    (
        "seed001 missing type",
        {"e.jsonl": lines(OK1, '{"id": "f2", "question": "q?", "gold_doc_ids": ["d"]}')},
        "e.jsonl",
        None,
        [("e.jsonl", 2, "type")],
    ),
    (
        "seed001 no gold doc",
        {"e.jsonl": lines(OK1, '{"id": "f2", "question": "q?", "type": "definition"}')},
        "e.jsonl",
        None,
        [("e.jsonl", 2, "gold_doc_ids")],
    ),
    (
        "seed001 empty gold doc",
        {"e.jsonl": lines(OK1, '{"id": "f2", "question": "q?", "gold_doc_ids": [], "type": "fact"}')},
        "e.jsonl",
        None,
        [("e.jsonl", 2, "gold_doc_ids")],
    ),
    (
        "seed001 negative with gold",
        {
            "e.jsonl": lines(
                '{"id": "n1", "question": "q?", "gold_doc_ids": ["d"], "gold_chunk_ids": ["c"], "type": "negative"}'
            )
        },
        "e.jsonl",
        None,
        [("e.jsonl", 1, "gold_doc_ids"), ("e.jsonl", 1, "gold_chunk_ids")],
    ),
    (
        "seed002 answerable no",
        {"s.jsonl": lines('{"id": "t1", "question": "q?", "answerable": "no"}')},
        "s.jsonl",
        None,
        [("s.jsonl", 1, "answerable")],
    ),
    (
        "seed002 support group out of range",
        {
            "s.jsonl": lines(
                json.dumps(
                    {
                        "id": "t1",
                        "question": "q?",
                        "gold_supports": [{"rel_path": "a.md"}],
                        "required_support_groups": [[0], [1, 0]],
                    }
                )
            )
        },
        "s.jsonl",
        None,
        [("s.jsonl", 1, "required_support_groups[1][0]")],
    ),
    (
        "seed002 support group shapes",
        {
            "s.jsonl": lines(
                json.dumps(
                    {
                        "id": "t1",
                        "question": "q?",
                        "gold_supports": [{"rel_path": "a.md"}],
                        "required_support_groups": [[], [True]],
                    }
                )
            )
        },
        "s.jsonl",
        None,
        [("s.jsonl", 1, "required_support_groups[0]"), ("s.jsonl", 1, "required_support_groups[1][0]")],
    ),
    (
        "seed002 gold support fields",
        {
            "s.jsonl": lines(
                json.dumps(
                    {
                        "id": "t1",
                        "question": "q?",
                        "gold_supports": [{"heading_path": "# A"}, {"rel_path": "b.md", "snippets": "x"}, "c.md"],
                    }
                )
            )
        },
        "s.jsonl",
        None,
        [
            ("s.jsonl", 1, "gold_supports[0].rel_path"),
            ("s.jsonl", 1, "gold_supports[1].snippets"),
            ("s.jsonl", 1, "gold_supports[2]"),
        ],
    ),
    (
        "seed002 recency rule",
        {"s.jsonl": lines('{"id": "t1", "question": "q?", "answerable": true, "recency_conflict_rule": "newest"}')},
        "s.jsonl",
        None,
        [("s.jsonl", 1, "recency_conflict_rule")],
    ),
    (
        "seed002 unanswerable with gold",
        {
            "s.jsonl": lines(
                '{"id": "t1", "question": "q?", "answerable": false, "gold_supports": [{"rel_path": "a.md"}]}'
            )
        },
        "s.jsonl",
        None,
        [("s.jsonl", 1, "gold_supports")],
    ),
    (
        "seed002 tags a string",
        {"s.jsonl": lines(OK2, '{"id": "t2", "question": "q?", "tags": "work"}')},
        "s.jsonl",
        None,
        [("s.jsonl", 2, "tags")],
    ),
    (
        "seed003 answer field missing and wrong",
        {
            "a.json": json.dumps(
                [
                    seed003_item(),
                    seed003_item(
                        expected={
                            "answer_example": {**ANSWER, "main_topic": 3, "predicted_questions": None},
                            "source_map": [],
                        }
                    ),
                ]
            )
        },
        "a.json",
        None,
        [
            ("a.json", 1, "expected.answer_example.main_topic"),
            ("a.json", 1, "expected.answer_example.predicted_questions"),
        ],
    ),
    (
        "seed003 no expected",
        {"a.json": json.dumps([seed003_item(), {"question": "q?"}])},
        "a.json",
        None,
        [("a.json", 1, "expected")],
    ),
    (
        "seed003 source_map refs",
        {
            "a.json": json.dumps(
                [
                    seed003_item(
                        expected={
                            "answer_example": ANSWER,
                            "source_map": [{"refs": [{"file": "a.pdf", "page": "3"}, {"anchors": ["x"]}]}, {"page": 1}],
                        }
                    )
                ]
            )
        },
        "a.json",
        None,
        [
            ("a.json", 0, "expected.source_map[0].refs[0].page"),
            ("a.json", 0, "expected.source_map[0].refs[1].file"),
            ("a.json", 0, "expected.source_map[1].file"),
        ],
    ),
    (
        "seed003 item not an object",
        {"a.json": json.dumps([seed003_item(), "q?", seed003_item()])},
        "a.json",
        None,
        [("a.json", 1, None)],
    ),
    # An explicit id equal to a generated one ("q0000") is a duplicate too.
    (
        "seed003 duplicate id",
        {"a.json": json.dumps([seed003_item(), seed003_item(id="q0000")])},
        "a.json",
        None,
        [("a.json", 1, "id")],
    ),
    (
        "seed003 malformed array",
        {"a.json": '[\n  {"question": "q?"},\n  {"question": "r?"\n]\n'},
        "a.json",
        None,
        [("a.json", None, None)],
    ),
    (
        "seed004 bad type",
        {"g.jsonl": lines(OK4, '{"question": "r?", "answer": "a", "relevant_chunk_ids": ["c1"], "type": "creative"}')},
        "g.jsonl",
        None,
        [("g.jsonl", 2, "type")],
    ),
    (
        "seed004 no gold",
        {"g.jsonl": lines('{"question": "q?", "answer": "a", "relevant_chunk_ids": [], "type": "literal"}')},
        "g.jsonl",
        None,
        [("g.jsonl", 1, "relevant_chunk_ids")],
    ),
    (
        "seed004 missing answer",
        {"g.jsonl": lines(OK4, '{"question": "r?", "relevant_chunk_ids": ["c1"], "type": "scenario"}')},
        "g.jsonl",
        None,
        [("g.jsonl", 2, "answer")],
    ),
    ("seed004 same generated id", {"g.jsonl": lines(OK4, OK4)}, "g.jsonl", None, [("g.jsonl", 2, "id")]),
    ("empty file", {"q.jsonl": ""}, "q.jsonl", None, [("q.jsonl", None, None)]),
    ("blank lines only", {"q.jsonl": "\n  \n\r\n"}, "q.jsonl", "seed000", [("q.jsonl", None, None)]),
    ("empty array", {"a.json": "[]"}, "a.json", None, [("a.json", None, None)]),
    ("unknown format", {"q.jsonl": lines('{"query": "q?", "label": 1}')}, "q.jsonl", None, [("q.jsonl", None, None)]),
    (
        "contradictory formats",
        {"q.jsonl": lines('{"id": "q1", "question": "x", "must_include": ["a"]}', OK1)},
        "q.jsonl",
        None,
        [("q.jsonl", None, None)],
    ),
    (
        "contradictory type values",
        {"q.jsonl": lines(OK1, '{"id": "f2", "question": "x", "type": "literal"}')},
        "q.jsonl",
        None,
        [("q.jsonl", None, None)],
    ),
    ("missing file", {}, "nope.jsonl", None, [("nope.jsonl", None, None)]),
    ("array given as seed000", {"a.json": json.dumps([seed003_item()])}, "a.json", "seed000", [("a.json", None, None)]),
    ("jsonl given as seed003", {"q.jsonl": lines(OK0)}, "q.jsonl", "seed003", [("q.jsonl", None, None)]),
    ("file given as beir", {"q.jsonl": lines(OK0)}, "q.jsonl", "beir", [("q.jsonl", None, None)]),
    ("directory given as seed000", {"b/queries.jsonl": BEIR_QUERIES}, "b", "seed000", [("b", None, None)]),
    ("beir without queries", {"b/qrels.tsv": QRELS_HEADER}, "b", "beir", [("b", None, None)]),
    ("beir without qrels", {"b/queries.jsonl": BEIR_QUERIES}, "b", None, [("b", None, None)]),
    (
        "beir with both qrels",
        {"b/queries.jsonl": BEIR_QUERIES, "b/qrels.tsv": QRELS_HEADER, "b/qrels/test.tsv": QRELS_HEADER},
        "b",
        None,
        [("b", None, None)],
    ),
    (
        "beir qrels rows",
        {
            "b/queries.jsonl": BEIR_QUERIES,
            "b/qrels/test.tsv": QRELS_HEADER + "q1\td1\t1\nq9\td1\t1\nq2\td2\thigh\nq2\td3\nq1\td1\t2\nq2\t \t1\n",
        },
        "b",
        None,
        [
            ("b/qrels/test.tsv", 3, "query-id"),
            ("b/qrels/test.tsv", 4, "score"),
            ("b/qrels/test.tsv", 5, None),
            ("b/qrels/test.tsv", 6, "corpus-id"),
            ("b/qrels/test.tsv", 7, "corpus-id"),
        ],
    ),
    (
        "beir qrels header",
        {"b/queries.jsonl": BEIR_QUERIES, "b/qrels.tsv": "q1\td1\t1\nq2\td1\t1\n"},
        "b",
        None,
        [("b/qrels.tsv", 1, None)],
    ),
    (
        "beir query fields",
        {
            "b/queries.jsonl": lines(
                '{"_id": "q1", "text": "a"}', '{"_id": "q2"}', '{"_id": "q1", "text": "c", "answers": "x"}'
            ),
            "b/qrels.tsv": QRELS_HEADER + "q1\td1\t1\n",
        },
        "b",
        None,
        [("b/queries.jsonl", 2, "text"), ("b/queries.jsonl", 3, "answers"), ("b/queries.jsonl", 3, "_id")],
    ),
    (
        "beir nothing judged",
        {"b/queries.jsonl": BEIR_QUERIES, "b/qrels.tsv": QRELS_HEADER + "q1\td1\t0\n"},
        "b",
        None,
        [("b/qrels.tsv", None, None)],
    ),
]


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize(("files", "target", "fmt", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_file_line_and_field(
    tmp_path: Path, files: dict[str, str | bytes], target: str, fmt: str | None, expected: list[Where]
) -> None:
    write_files(tmp_path, files)
    with pytest.raises(InputError) as caught:
        load_evalset(tmp_path / target, format=fmt)
    got = [(p.file, p.line, p.field) for p in caught.value.problems]
    assert got == [(str(tmp_path / rel), line, field) for rel, line, field in expected]


def test_one_file_with_three_problems_reports_all_three(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_text(
        lines(
            '{"id": "q1", "question": "a", "weight": 1}',
            '{"id": "q2", "question": "b", "weight": "high"}',
            '{"id": "q3", "question": "c"',
            '{"id": "q1", "question": "d"}',
        ),
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        load_evalset(path)
    file = str(path)
    assert [(p.file, p.line, p.field) for p in caught.value.problems] == [
        (file, 2, "weight"),
        (file, 3, None),
        (file, 4, "id"),
    ]
    messages = [p.message for p in caught.value.problems]
    assert messages[0] == "expected a number, got string 'high'"
    assert messages[1].startswith("malformed JSON:")
    assert messages[2] == "duplicate id 'q1' (first at line 1)"
    assert "3 problem(s)" in str(caught.value)


def test_duplicate_in_array_names_the_first_index(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps([seed003_item(id="x"), seed003_item(), seed003_item(id="x")]), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_evalset(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field, problem.message) == (2, "id", "duplicate id 'x' (first at index 0)")


def test_invalid_format_name_lists_the_valid_ones(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(lines(OK0), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_evalset(path, format="seed999")
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.field) == (str(path), None, None)
    assert (
        problem.message == "unknown format 'seed999'; valid formats: seed000, seed001, seed002, seed003, seed004, beir"
    )


def test_detection_messages_name_the_evidence(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(lines('{"id": "q1", "question": "x", "weight": 2, "gold_doc_ids": ["d"]}'), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_evalset(path)
    assert caught.value.problems[0].message == (
        "keys of contradictory formats: seed000 (weight); seed001 (gold_doc_ids); pass the format explicitly"
    )
    path.write_text(lines('{"query": "q?"}'), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_evalset(path)
    assert caught.value.problems[0].message.startswith("unknown format: keys query match none of seed000")


def test_unknown_extra_keys_are_kept_not_rejected(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text(
        lines('{"id": "f1", "question": "q?", "gold_doc_ids": ["d1"], "type": "fact", "annotator": {"name": "b"}}'),
        encoding="utf-8",
    )
    (q,) = load_evalset(path)
    assert q.raw["annotator"] == {"name": "b"}


def test_null_optional_fields_read_as_absent(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        lines('{"id": "q1", "question": "x", "must_include": null, "weight": null, "require_citation": null}'),
        encoding="utf-8",
    )
    (q,) = load_evalset(path)
    assert (q.must_include, q.weight, q.require_citation) == ((), 1.0, False)
