from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval_assets.corpus.chunking import CHUNKER_VERSION, ChunkerParams, chunk_documents, count_tokens
from rag_eval_assets.corpus.ids import chunk_id
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.corpus.model import CHUNK_COLUMNS, Document, Section

VAULT = Path(__file__).parent / "fixtures" / "corpus" / "vault"


def _doc(text: str, doc_id: str = "d", heading_path: str = "") -> Document:
    return Document(doc_id, doc_id, "", "text", (Section(heading_path, None, text, 0),))


def _texts(text: str, size: int, overlap: int) -> list[str]:
    return chunk_documents([_doc(text)], "c", ChunkerParams(size, overlap))["text"].tolist()


def test_chunk_id_is_a_fixed_content_hash() -> None:
    text = "A single element in a string is a byte."
    assert chunk_id("personal", "Software/LeetCode Tips.md", "Golang Tips & Oddities", text) == "f7258f382773a16a"
    assert chunk_id("c", "中文/说明.txt", "", "检索") == "a3e69967d739f09d"
    # Each field counts, and the separator keeps "ab"+"c" apart from "a"+"bc".
    assert chunk_id("ab", "c", "", "t") != chunk_id("a", "bc", "", "t")


def test_params_are_validated() -> None:
    assert CHUNKER_VERSION == "chars-v1"
    assert ChunkerParams() == ChunkerParams(chunk_size_chars=800, overlap_chars=100)
    with pytest.raises(ValueError, match="chunk_size_chars"):
        ChunkerParams(chunk_size_chars=0, overlap_chars=0)
    with pytest.raises(ValueError, match="overlap_chars"):
        ChunkerParams(chunk_size_chars=100, overlap_chars=100)
    with pytest.raises(ValueError, match="overlap_chars"):
        ChunkerParams(chunk_size_chars=100, overlap_chars=-1)


def test_cut_prefers_paragraph_then_sentence_then_whitespace_then_hard() -> None:
    paragraphs = "First paragraph. It ends here\n\nSecond one follows. It is long enough to be cut."
    assert _texts(paragraphs, 40, 0)[0] == "First paragraph. It ends here"
    sentences = "One sentence ends here. Another sentence goes on and on"
    assert _texts(sentences, 30, 0) == ["One sentence ends here.", "Another sentence goes on and", "on"]
    assert _texts("Pi is 3.14159 and e is 2.71828 today", 20, 0)[0] == "Pi is 3.14159 and e"  # "3." is no end
    assert _texts("alpha beta gamma delta epsilon zeta", 20, 0) == ["alpha beta gamma", "delta epsilon zeta"]
    assert _texts("x" * 50, 20, 0) == ["x" * 20, "x" * 20, "x" * 10]
    assert _texts("一二三四五六七。八九十一二三四", 10, 0) == ["一二三四五六七。", "八九十一二三四"]


def test_next_window_starts_at_a_word_inside_the_overlap() -> None:
    chunks = chunk_documents([_doc("alpha beta gamma delta epsilon zeta eta theta")], "c", ChunkerParams(20, 8))
    assert chunks["text"].tolist() == ["alpha beta gamma", "gamma delta epsilon", "epsilon zeta eta", "zeta eta theta"]
    assert chunks[["char_start", "char_end"]].values.tolist() == [[0, 16], [11, 30], [23, 39], [31, 45]]


def test_whitespace_only_sections_give_no_chunks() -> None:
    doc = Document("d", "d", "", "text", (Section("", None, " \n\t ", 0), Section("A", None, "", 4)))
    chunks = chunk_documents([doc], "c", ChunkerParams())
    assert list(chunks.columns) == list(CHUNK_COLUMNS)
    assert len(chunks) == 0


def test_identical_chunks_get_numbered_ids() -> None:
    chunks = chunk_documents([_doc("x" * 50)], "c", ChunkerParams(20, 0))
    base = chunk_id("c", "d", "", "x" * 20)
    assert chunks["chunk_id"].tolist() == [base, f"{base}-2", chunk_id("c", "d", "", "x" * 10)]


def test_count_tokens() -> None:
    assert count_tokens("Hello world, this is five.") == 5
    assert count_tokens("检索增强生成。") == 6
    assert count_tokens("RAG 系统，v2 版本") == 6
    assert count_tokens("") == 0


def test_fixture_corpus_chunks() -> None:
    docs = load_corpus(VAULT)
    chunks = chunk_documents(docs, "vault", ChunkerParams(200, 40))
    assert list(chunks.columns) == list(CHUNK_COLUMNS)
    assert str(chunks["page"].dtype) == "Int64"
    assert set(chunks["corpus_id"]) == {"vault"}
    for doc in docs:
        file_text = (VAULT / doc.rel_path).read_text(encoding="utf-8")
        rows = chunks[chunks["doc_id"] == doc.doc_id]
        assert rows["chunk_index"].tolist() == list(range(len(rows)))
        for row in rows.itertuples():
            assert file_text[row.char_start : row.char_end] == row.text
            assert row.n_tokens == count_tokens(row.text)
    leetcode = chunks[chunks["doc_id"] == "Software/LeetCode Tips.md"]
    assert leetcode["heading_path"].drop_duplicates().tolist() == [
        "",
        "Golang Tips & Oddities",
        "Golang Tips & Oddities > Maps",
        "Golang Tips & Oddities > Slices",
        "Python Tips",
        "Python Tips > Default arguments",
    ]
    assert leetcode["text"].iloc[1] == (
        "# Golang Tips & Oddities\n\n"
        "Go has no built in string sort: convert the string to a slice of runes, sort the slice, then convert it back."
    )
    chinese = chunks[chunks["doc_id"] == "中文/说明.txt"]
    assert chinese["n_tokens"].iloc[0] > 100  # one token per Han character, not one per line


def test_chunking_cranfield_sized_corpus_is_fast() -> None:
    words = "the boundary layer flow over a flat plate at high mach number with heat transfer".split()
    docs = [_doc(" ".join(words[(i + j) % len(words)] for j in range(150)) + " .", str(i)) for i in range(1400)]
    started = time.perf_counter()
    chunks = chunk_documents(docs, "cranfield", ChunkerParams(800, 100))
    assert time.perf_counter() - started < 2.0
    assert chunks["doc_id"].nunique() == 1400
    assert chunks["chunk_id"].is_unique


# Hypothesis: texts mixing words, sentence ends, paragraph breaks, CJK, and long unbroken runs.
_pieces = st.sampled_from(["word", "longerword", " ", " ", "\n", "\n\n", ". ", "! ", "。", "检索", "x" * 30, "\t"])
_texts_strategy = st.lists(_pieces, max_size=60).map("".join)
_sections = st.lists(st.tuples(st.sampled_from(["", "A", "A > B", "C"]), _texts_strategy), min_size=1, max_size=4)
_docs = st.lists(_sections, min_size=1, max_size=3)


@st.composite
def _params(draw: st.DrawFn) -> ChunkerParams:
    size = draw(st.integers(min_value=1, max_value=120))
    return ChunkerParams(size, draw(st.integers(min_value=0, max_value=size - 1)))


def _build(doc_specs: list[list[tuple[str, str]]], pdf: bool) -> list[Document]:
    docs = []
    for n, spec in enumerate(doc_specs):
        sections, offset = [], 0
        for page, (heading, text) in enumerate(spec, start=1):
            sections.append(Section("" if pdf else heading, page if pdf else None, text, offset))
            offset += len(text) + 1
        docs.append(Document(f"doc{n}.md", f"doc{n}.md", "", "pdf" if pdf else "markdown", tuple(sections)))
    return docs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc_specs=_docs, params=_params(), pdf=st.booleans())
def test_chunker_invariants(doc_specs: list[list[tuple[str, str]]], params: ChunkerParams, pdf: bool) -> None:
    docs = _build(doc_specs, pdf)
    chunks = chunk_documents(docs, "corpus", params)

    assert chunks.equals(chunk_documents(docs, "corpus", params))  # deterministic
    assert chunks["chunk_id"].is_unique
    for doc in docs:
        rows = list(chunks[chunks["doc_id"] == doc.doc_id].itertuples())
        assert [r.chunk_index for r in rows] == list(range(len(rows)))
        for section in doc.sections:
            section_end = section.char_start + len(section.text)
            inside = [r for r in rows if section.char_start <= r.char_start and r.char_end <= section_end]
            for r in inside:  # lies in the section, carries its anchor, respects the size
                assert r.text == section.text[r.char_start - section.char_start : r.char_end - section.char_start]
                assert r.heading_path == section.heading_path
                assert (None if pd.isna(r.page) else r.page) == section.page
                assert 0 < len(r.text) <= params.chunk_size_chars
                assert r.text == r.text.strip()
            for before, after in zip(inside, inside[1:]):  # moves forward, overlaps at most overlap_chars
                assert before.char_start < after.char_start
                assert after.char_start >= before.char_end - params.overlap_chars
            covered = set()
            for r in inside:
                covered.update(range(r.char_start - section.char_start, r.char_end - section.char_start))
            assert all(i in covered for i, ch in enumerate(section.text) if not ch.isspace())
        # Every chunk was found inside exactly one section: none crosses a boundary.
        n_inside = sum(
            section.char_start <= r.char_start and r.char_end <= section.char_start + len(section.text)
            for section in doc.sections
            for r in rows
            if r.text
        )
        assert n_inside == len(rows)
