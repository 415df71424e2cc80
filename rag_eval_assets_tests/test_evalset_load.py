"""Golden loads of every evalset format, detection, explicit formats, and the shared row round trip."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path

import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.load import load_evalset, load_evalset_with_warnings
from rag_eval_assets.evalset.schema import GoldSupport, Question, SourceRef, question_from_row, question_to_row

FIXTURES = Path(__file__).parent / "fixtures" / "evalset"
PATHS = {
    "seed000": FIXTURES / "seed000" / "questions.jsonl",
    "seed001": FIXTURES / "seed001" / "evalset.jsonl",
    "seed002": FIXTURES / "seed002" / "eval_set.jsonl",
    "seed003": FIXTURES / "seed003" / "question_v2.json",
    "seed004": FIXTURES / "seed004" / "generated_queries.jsonl",
    "beir": FIXTURES / "beir",
}


def jsonl_objects(path: Path) -> dict[int, dict]:
    """line number -> object, read with the standard library as the loader's independent reference."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return {n: json.loads(line) for n, line in enumerate(lines, start=1) if line.strip()}


def assert_same_questions(actual: list[Question], expected: list[Question]) -> None:
    assert [q.id for q in actual] == [q.id for q in expected]
    for got, want in zip(actual, expected, strict=True):
        for f in fields(Question):
            assert getattr(got, f.name) == getattr(want, f.name), f"{want.id}: field {f.name}"


def test_seed000_questions_jsonl() -> None:
    path = PATHS["seed000"]
    file, raw = str(path), jsonl_objects(path)
    expected = [
        Question(
            id="q001",
            question="Какая выручка за 2023 год?",
            format="seed000",
            source_file=file,
            source_line=1,
            must_include=("2023",),
            must_not_include=("XX", "??"),
            weight=1.0,
            raw=raw[1],
        ),
        Question(
            id="q002",
            question="На какой странице описан порядок возврата?",
            format="seed000",
            source_file=file,
            source_line=2,
            must_include_any=(("возврат",), ("14 дней", "две недели")),
            require_citation=True,
            weight=2.0,
            raw=raw[2],
        ),
        # Line 3 is blank; the unknown key "reviewer" stays in raw only.
        Question(
            id="q003", question="Кто подписал договор?", format="seed000", source_file=file, source_line=4, raw=raw[4]
        ),
    ]
    assert_same_questions(load_evalset(path), expected)
    assert raw[4]["reviewer"] == "anna"


def test_seed001_evalset_jsonl() -> None:
    path = PATHS["seed001"]
    file, raw = str(path), jsonl_objects(path)
    expected = [
        Question(
            id="def-01",
            question="Что такое налоговый агент?",
            format="seed001",
            source_file=file,
            source_line=1,
            gold_doc_ids=("nk-24",),
            gold_chunk_ids=("nk-24#0003", "nk-24#0004"),
            type="definition",
            notes="ст. 24 НК РФ",
            source="manual",
            raw=raw[1],
        ),
        Question(
            id="fact-01",
            question="Какой срок подачи декларации 3-НДФЛ?",
            format="seed001",
            source_file=file,
            source_line=2,
            gold_doc_ids=("nk-229",),
            type="fact",
            source="autolink",
            raw=raw[2],
        ),
        Question(
            id="neg-01",
            question="Какая ставка налога на Марсе?",
            format="seed001",
            source_file=file,
            source_line=3,
            type="negative",
            answerable=False,
            raw=raw[3],
        ),
    ]
    questions = load_evalset(path)
    assert_same_questions(questions, expected)
    assert [q.is_negative for q in questions] == [False, False, True]


def test_seed002_eval_set_jsonl() -> None:
    path = PATHS["seed002"]
    file, raw = str(path), jsonl_objects(path)
    expected = [
        Question(
            id="test_001",
            question="What are the key tips for LeetCode interviews in Golang?",
            format="seed002",
            source_file=file,
            source_line=1,
            expected_key_facts=("no built in string sort", "single element in string is a byte", "custom sorting"),
            gold_supports=(
                GoldSupport(
                    "Software/LeetCode Tips.md",
                    "# Golang Tips & Oddities",
                    ("no built in string sort", "single element in a string is a byte"),
                ),
            ),
            tags=("personal", "code"),
            vaults=("personal",),
            folders=("Software",),
            category="factual",
            difficulty="easy",
            raw=raw[1],
        ),
        Question(
            id="test_002",
            question="Which gym did I join after moving, and what did it cost?",
            format="seed002",
            source_file=file,
            source_line=2,
            expected_key_facts=("joined Iron Temple", "49 per month"),
            gold_supports=(
                GoldSupport("Health/Gym.md", "# Gyms > ## 2024", ("Iron Temple",)),
                GoldSupport("Finance/Budget.md", "", ("gym 49",)),
                GoldSupport("Health/Old Gym.md", "", ()),
            ),
            required_support_groups=((0, 1), (2,)),
            recency_conflict_rule="cite_newer",
            tags=("personal", "health"),
            vaults=("personal",),
            folders=("Health", "Finance"),
            category="multi_hop",
            difficulty="hard",
            raw=raw[2],
        ),
        Question(
            id="test_003",
            question="What is the capital of Australia?",
            format="seed002",
            source_file=file,
            source_line=3,
            answerable=False,
            tags=("general",),
            category="general",
            difficulty="easy",
            raw=raw[3],
        ),
    ]
    assert_same_questions(load_evalset(path), expected)


def test_seed003_json_array() -> None:
    path = PATHS["seed003"]
    file, raw = str(path), json.loads(path.read_text(encoding="utf-8"))
    expected = [
        Question(
            id="q0000",
            question="新進員工如何申請特休？",
            format="seed003",
            source_file=file,
            source_line=0,
            type="procedure",
            category="hr",
            answer_example={
                "target_audience": "新進員工",
                "main_topic": "人事",
                "sub_topic": "特休申請",
                "detailed_description": ["到職滿六個月後享有三日特休", "於系統提出申請並經主管核准"],
                "original_evidence": "勞工在同一雇主繼續工作滿六個月以上一年未滿者，三日。",
                "predicted_questions": ["特休可以預支嗎？"],
            },
            # The {"refs": [...]} entry is flattened into its two references.
            source_map=(
                SourceRef("docs/hr/leave.pdf", 3, ("滿六個月", "三日")),
                SourceRef("docs/hr/faq.md", None, ("特休申請",)),
            ),
            raw=raw[0],
        ),
        Question(
            id="q0001",
            question="Where is the VPN config stored?",
            format="seed003",
            source_file=file,
            source_line=1,
            answer_example={
                "target_audience": "engineers",
                "main_topic": "IT",
                "sub_topic": "VPN",
                "detailed_description": [],
                "original_evidence": "The VPN profile lives in the IT share under vpn/profile.ovpn.",
                "predicted_questions": [],
            },
            source_map=(SourceRef("docs/it/vpn.md", None, ("vpn/profile.ovpn",)),),
            raw=raw[1],
        ),
    ]
    assert_same_questions(load_evalset(path), expected)


def test_seed004_generated_queries() -> None:
    path = PATHS["seed004"]
    file, raw = str(path), jsonl_objects(path)
    expected = [
        Question(
            id="lit-1",
            question="What is the default chunk overlap?",
            format="seed004",
            source_file=file,
            source_line=1,
            gold_chunk_ids=("guide.md#0002",),
            type="literal",
            reference_answer="The default chunk overlap is 64 characters.",
            raw=raw[1],
        ),
        Question(
            # "gen-" + sha256("How much do ...")[:12]
            id="gen-461419c2f5cc",
            question="How much do neighbouring pieces of text share by default?",
            format="seed004",
            source_file=file,
            source_line=2,
            gold_chunk_ids=("guide.md#0002",),
            type="paraphrase",
            reference_answer="64 characters.",
            raw=raw[2],
        ),
        Question(
            id="gen-1ca2e55232a4",
            question="My answers miss text cut at chunk borders. What setting helps?",
            format="seed004",
            source_file=file,
            source_line=3,
            gold_chunk_ids=("guide.md#0002", "faq.md#0001"),
            type="scenario",
            gold_supports=(GoldSupport("guide.md", "# Chunking", ("chunk overlap",)),),
            source_map=(SourceRef("faq.md", None, ("cut at chunk borders",)),),
            reference_answer="Increase the chunk overlap.",
            raw=raw[3],
        ),
    ]
    assert_same_questions(load_evalset(path), expected)


def test_seed004_generated_id_is_sha256_of_question() -> None:
    text = "How much do neighbouring pieces of text share by default?"
    assert "gen-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12] == "gen-461419c2f5cc"


def test_beir_directory_keeps_graded_qrels_and_drops_unjudged_queries() -> None:
    path = PATHS["beir"]
    queries_file = str(path / "queries.jsonl")
    raw = jsonl_objects(path / "queries.jsonl")
    expected = [
        Question(
            id="q1",
            question="what is bm25",
            format="beir",
            source_file=queries_file,
            source_line=1,
            gold_doc_ids=("d1", "d3"),
            qrels={"d1": 2, "d2": 0, "d3": 1},
            raw=raw[1],
        ),
        Question(
            id="q2",
            question="who wrote the okapi paper",
            format="beir",
            source_file=queries_file,
            source_line=2,
            gold_doc_ids=("d7",),
            reference_answer="Robertson",
            qrels={"d7": 1},
            raw=raw[2],
        ),
    ]
    result = load_evalset_with_warnings(path)
    assert result.format == "beir"
    assert_same_questions(result.questions, expected)
    # q3 has no qrels row, q4 only a grade-0 row: BEIR evaluates neither.
    assert len(result.warnings) == 1
    assert "dropped 2 of 4 queries" in result.warnings[0]
    assert result.warnings[0].endswith(": q3, q4")


def test_beir_flat_qrels_tsv(tmp_path: Path) -> None:
    (tmp_path / "queries.jsonl").write_text('{"_id": "1", "text": "a"}\n{"_id": "2", "text": "b"}\n', encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\r\n1\tdoc-a\t1\r\n2\tdoc-b\t3\r\n", encoding="utf-8"
    )
    result = load_evalset_with_warnings(tmp_path)
    assert [(q.id, q.gold_doc_ids, q.qrels) for q in result.questions] == [
        ("1", ("doc-a",), {"doc-a": 1}),
        ("2", ("doc-b",), {"doc-b": 3}),
    ]
    assert result.warnings == []


@pytest.mark.parametrize("fmt", list(PATHS))
def test_detection(fmt: str) -> None:
    assert load_evalset_with_warnings(PATHS[fmt]).format == fmt


@pytest.mark.parametrize("fmt", list(PATHS))
def test_explicit_format_gives_the_detected_result(fmt: str) -> None:
    assert load_evalset(PATHS[fmt], format=fmt) == load_evalset(PATHS[fmt])


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    # Keys of seed 000 and seed 001 at once: detection refuses, an explicit format decides.
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"id": "a", "question": "q?", "gold_doc_ids": ["d1"], "weight": 2}\n', encoding="utf-8")
    with pytest.raises(InputError):
        load_evalset(path)
    (as_seed000,) = load_evalset(path, format="seed000")
    assert (as_seed000.format, as_seed000.weight, as_seed000.gold_doc_ids) == ("seed000", 2.0, ())
    assert as_seed000.raw["gold_doc_ids"] == ["d1"]


def test_jsonl_with_only_id_and_question_is_seed002_without_gold(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text('{"id": "a", "question": "q?"}\n{"id": "b", "question": "r?"}\n', encoding="utf-8")
    assert load_evalset_with_warnings(path).format == "seed002"
    questions = load_evalset(path)
    assert [(q.id, q.format, q.answerable, q.gold_supports) for q in questions] == [
        ("a", "seed002", True, ()), ("b", "seed002", True, ())
    ]


def test_gold_supports_with_generated_query_keys_is_seed004(tmp_path: Path) -> None:
    path = tmp_path / "gen.jsonl"
    line = {
        "question": "q?",
        "answer": "a",
        "relevant_chunk_ids": [],
        "type": "literal",
        "gold_supports": [{"rel_path": "a.md"}],
    }
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    (q,) = load_evalset(path)
    assert (q.format, q.gold_chunk_ids, q.gold_supports) == ("seed004", (), (GoldSupport("a.md"),))


def test_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + '{"id": "q1", "question": "Сколько?"}\r\n\r\n{"id": "q2", "question": "x"}\r\n'.encode()
    )
    assert [(q.id, q.question, q.source_line) for q in load_evalset(path)] == [("q1", "Сколько?", 1), ("q2", "x", 3)]
    array = tmp_path / "bom.json"
    array.write_bytes(b"\xef\xbb\xbf" + PATHS["seed003"].read_bytes())
    assert [q.id for q in load_evalset(array)] == ["q0000", "q0001"]


def test_source_file_is_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "questions.jsonl").write_text('{"id": "q1", "question": "x"}\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_evalset("questions.jsonl")[0].source_file == "questions.jsonl"
    assert load_evalset(Path("./questions.jsonl"))[0].source_file == "questions.jsonl"


def test_loading_writes_nothing(tmp_path: Path) -> None:
    for name in ("seed000", "seed003"):
        (tmp_path / PATHS[name].name).write_bytes(PATHS[name].read_bytes())
    (tmp_path / "beir" / "qrels").mkdir(parents=True)
    for rel in ("queries.jsonl", "qrels/test.tsv"):
        (tmp_path / "beir" / rel).write_bytes((PATHS["beir"] / rel).read_bytes())
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    for p in (tmp_path / PATHS["seed000"].name, tmp_path / PATHS["seed003"].name, tmp_path / "beir"):
        load_evalset(p)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


@pytest.mark.parametrize("fmt", list(PATHS))
def test_row_round_trip(fmt: str) -> None:
    questions = load_evalset(PATHS[fmt])
    rows = [question_to_row(q) for q in questions]
    # Rows must be JSON-storable scalars: nested values became JSON text.
    assert all(isinstance(v, (str, int, float, bool, type(None))) for row in rows for v in row.values())
    assert [question_from_row(row) for row in rows] == questions


DOCS = Path(__file__).resolve().parents[1] / "docs" / "evalset.md"


def doc_examples() -> list[tuple[str, str]]:
    """(format, example) for each "### seedNNN" section of docs/evalset.md with a json block."""
    examples = []
    for section in DOCS.read_text(encoding="utf-8").split("\n### ")[1:]:
        fmt = section.split()[0]
        if fmt.startswith("seed") and "```json\n" in section:
            examples.append((fmt, section.split("```json\n", 1)[1].split("```", 1)[0]))
    return examples


def test_docs_show_an_example_for_every_seed_format() -> None:
    assert [fmt for fmt, _ in doc_examples()] == ["seed000", "seed001", "seed002", "seed003", "seed004"]


@pytest.mark.parametrize(("fmt", "example"), doc_examples())
def test_doc_examples_load_as_their_format(tmp_path: Path, fmt: str, example: str) -> None:
    path = tmp_path / "example"
    path.write_text(example, encoding="utf-8")
    result = load_evalset_with_warnings(path)
    assert result.format == fmt
    assert len(result.questions) == 1
