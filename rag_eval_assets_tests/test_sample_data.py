"""The sample data shipped in data/sample/: it loads, its gold resolves, it covers every seed field,
and scripts/make_sample_data.py reproduces it byte for byte."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import MISSING, fields
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from pypdf import PdfReader

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import normalise_for_match, resolve_gold_report
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.evalset.load import LoadResult, load_evalset_with_warnings
from rag_eval_assets.evalset.schema import Question

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
CORPUS = SAMPLE / "corpus"
EVALSETS = SAMPLE / "evalsets"
PDF = CORPUS / "docs" / "annual-report-2025.pdf"
SCRIPT = ROOT / "scripts" / "make_sample_data.py"

EXPECTED = {  # evalset -> (detected format, number of questions)
    "questions.jsonl": ("seed000", 8),
    "evalset.jsonl": ("seed001", 11),
    "eval_set.jsonl": ("seed002", 14),
    "question_v2.json": ("seed003", 6),
    "generated_queries.jsonl": ("seed004", 8),
    "beir": ("beir", 8),
}
# Keys each seed documents for its records (BEIR: the query keys), all of which the sample uses.
SEED_KEYS = {
    "questions.jsonl": {"id", "question", "must_include", "must_include_any", "must_not_include",
                        "require_citation", "weight"},
    "evalset.jsonl": {"id", "question", "gold_doc_ids", "gold_chunk_ids", "type", "notes", "source"},
    "eval_set.jsonl": {"id", "question", "answerable", "expected_key_facts", "gold_supports",
                       "required_support_groups", "recency_conflict_rule", "tags", "vaults", "folders",
                       "category", "difficulty"},
    "question_v2.json": {"question", "expected"},
    "generated_queries.jsonl": {"question", "answer", "relevant_chunk_ids", "type"},
    "beir": {"_id", "text", "answers"},
}
ANSWER_EXAMPLE_KEYS = {"target_audience", "main_topic", "sub_topic", "detailed_description", "original_evidence",
                       "predicted_questions"}
# Question fields every loaded question fills in whatever its format; every other field is a seed's.
BOOKKEEPING = {"id", "question", "format", "source_file", "source_line", "raw"}
CYRILLIC = re.compile(r"[А-Яа-яЁё]")
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def chunks() -> pd.DataFrame:
    return chunk_documents(load_corpus(CORPUS), "sample", ChunkerParams(chunk_size_chars=800, overlap_chars=100))


@pytest.fixture(scope="module")
def loaded() -> dict[str, LoadResult]:
    return {name: load_evalset_with_warnings(EVALSETS / name) for name in EXPECTED}


@pytest.fixture(scope="module")
def doc_texts() -> dict[str, str]:
    """rel_path -> the document's text in the form gold resolution compares in."""
    return {
        doc.rel_path: normalise_for_match(" ".join(s.text for s in doc.sections)) for doc in load_corpus(CORPUS)
    }


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_sample_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_every_evalset_loads_in_its_own_format(loaded):
    found = {name: (result.format, len(result.questions)) for name, result in loaded.items()}
    assert found == EXPECTED
    assert all(result.warnings == [] for result in loaded.values())


def test_every_gold_label_resolves_against_the_chunked_corpus(loaded, chunks):
    for name, result in loaded.items():
        resolution = resolve_gold_report(result.questions, chunks)  # raises on a label pointing nowhere
        gold, counts = resolution.gold, resolution.counts
        # Seed 000 scores answers by rules and has no retrieval gold; everywhere else every answerable
        # question has some.
        with_gold = set() if name == "questions.jsonl" else {q.id for q in result.questions if not q.is_negative}
        assert set(gold["query_id"]) == with_gold, name
        assert counts["stale_chunk_ids"] == 0, name


def test_chunk_id_labels_name_chunks_of_the_default_chunking(loaded, chunks):
    known = set(chunks["chunk_id"])
    labelled = [q for name in ("evalset.jsonl", "generated_queries.jsonl") for q in loaded[name].questions]
    assert sum(len(q.gold_chunk_ids) for q in labelled) >= 15
    for q in labelled:
        assert set(q.gold_chunk_ids) <= known, q.id


def test_the_files_together_use_every_question_field_the_seeds_define(loaded):
    questions = [q for result in loaded.values() for q in result.questions]
    unused = []
    for f in fields(Question):
        if f.name in BOOKKEEPING:
            continue
        default = f.default if f.default is not MISSING else f.default_factory()
        if all(getattr(q, f.name) == default for q in questions):
            unused.append(f.name)
    assert unused == []


def test_each_file_uses_every_key_its_seed_documents(loaded):
    for name, keys in SEED_KEYS.items():
        used = set().union(*(q.raw.keys() for q in loaded[name].questions))
        assert keys <= used, (name, keys - used)
    answer_keys = set().union(*(q.answer_example.keys() for q in loaded["question_v2.json"].questions))
    assert answer_keys == ANSWER_EXAMPLE_KEYS


def test_each_file_covers_its_seeds_variants(loaded):
    seed000 = loaded["questions.jsonl"].questions
    groups = [g for q in seed000 for g in q.raw.get("must_include_any", [])]
    assert {type(g) for g in groups} == {str, list}
    assert {q.require_citation for q in seed000} == {True, False}
    assert any(q.weight != 1.0 for q in seed000)

    assert {q.type for q in loaded["evalset.jsonl"].questions} == {"definition", "fact", "negative"}
    assert {q.type for q in loaded["generated_queries.jsonl"].questions} == {"literal", "paraphrase", "scenario"}

    seed002 = loaded["eval_set.jsonl"].questions
    assert {q.category for q in seed002} == {"factual", "reasoning", "multi_hop", "recency/conflict", "general",
                                             "adversarial"}
    assert {q.difficulty for q in seed002} == {"easy", "medium", "hard"}
    assert (0, 1) in {g for q in seed002 for g in q.required_support_groups or ()}
    heading_paths = [s.heading_path for q in seed002 for s in q.gold_supports]
    assert any(h.startswith("# ") for h in heading_paths)  # the seed's own "# Heading" style
    assert any(" > " in h and "#" not in h for h in heading_paths)  # the nested "A > B" style
    assert any(not q.answerable and q.category == "general" for q in seed002)
    assert any(CYRILLIC.search(q.question) for q in seed002) and any(HAN.search(q.question) for q in seed002)

    seed003 = loaded["question_v2.json"].questions
    assert any(ref.page is not None for q in seed003 for ref in q.source_map)
    assert any(HAN.search(q.question) for q in seed003)

    beir = loaded["beir"].questions
    assert {grade for q in beir for grade in q.qrels.values()} == {1, 2}
    assert any(q.reference_answer is not None for q in beir) and any(q.reference_answer is None for q in beir)


def test_rule_strings_of_the_pdf_questions_occur_in_the_pdf(loaded, doc_texts):
    text = doc_texts["docs/annual-report-2025.pdf"]
    for q in loaded["questions.jsonl"].questions:
        for s in q.must_include:
            assert normalise_for_match(s) in text, (q.id, s)
        for group in q.must_include_any:
            assert any(normalise_for_match(s) in text for s in group), (q.id, group)


def test_structured_evidence_quotes_its_source(loaded, doc_texts):
    for q in loaded["question_v2.json"].questions:
        # A source_map file is a rel_path or, as resolve_gold allows, a bare file name.
        sources = [text for rel_path, text in doc_texts.items()
                   if any(ref.file in (rel_path, Path(rel_path).name) for ref in q.source_map)]
        evidence = q.answer_example["original_evidence"]
        for sentence in re.split(r"(?<=。)|(?<=\.)\s+", evidence):
            if sentence.strip():
                assert any(normalise_for_match(sentence) in text for text in sources), (q.id, sentence)


def test_beir_answers_occur_in_a_fully_relevant_document(loaded, doc_texts):
    for q in loaded["beir"].questions:
        if q.reference_answer is not None:
            best = [doc for doc, grade in q.qrels.items() if grade == 2]
            assert any(normalise_for_match(q.reference_answer) in doc_texts[d] for d in best), q.id


def test_pdf_has_several_pages_each_with_cyrillic_text_and_its_own_facts():
    pages = [page.extract_text() for page in PdfReader(PDF).pages]
    assert len(pages) >= 4
    for number, text in enumerate(pages, start=1):
        assert len(CYRILLIC.findall(text)) > 100, number
        assert f"стр. {number}" in text
    assert "214 ясных наблюдательных ночей" in pages[0]
    assert "61,4 млн рублей" in pages[1]
    assert "Ember 4K" in pages[2] and "Ember 4K" not in pages[1]
    assert "SN 2025kra" in pages[3]


def test_corpus_is_small_and_holds_russian_and_chinese_text(doc_texts):
    assert sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file()) < 300_000
    russian = [d for d in doc_texts if d.startswith("ru/")]
    chinese = [d for d in doc_texts if d.startswith("zh/")]
    assert len(russian) == 2 and {Path(d).suffix for d in chinese} == {".md", ".txt"}
    assert all(len(CYRILLIC.findall(doc_texts[d])) > 500 for d in russian)
    assert all(len(HAN.findall(doc_texts[d])) > 100 for d in chinese)


def test_the_script_regenerates_the_shipped_files_byte_for_byte(tmp_path):
    _script().make_sample_data(tmp_path)
    shipped = _tree(SAMPLE)
    assert sorted(_tree(tmp_path)) == sorted(shipped)
    assert _tree(tmp_path) == shipped
