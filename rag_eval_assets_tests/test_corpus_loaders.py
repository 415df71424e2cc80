from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rag_eval_assets.corpus.beir import load_beir_corpus
from rag_eval_assets.corpus.load import corpus_sha256, load_corpus
from rag_eval_assets.corpus.markdown import load_markdown
from rag_eval_assets.corpus.model import Section
from rag_eval_assets.corpus.tables import documents_from_frame, documents_to_frame
from rag_eval_assets.corpus.text import load_text
from rag_eval_assets.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "corpus"
VAULT = FIXTURES / "vault"
LEETCODE = "Software/LeetCode Tips.md"
TAXES = "Налоги/Вычеты.md"
CHINESE = "中文/说明.txt"


def _file_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_markdown_sections_follow_the_heading_stack() -> None:
    doc = load_markdown(VAULT / LEETCODE, LEETCODE)
    text = _file_text(VAULT / LEETCODE)

    assert (doc.doc_id, doc.rel_path, doc.title, doc.kind) == (LEETCODE, LEETCODE, "Golang Tips & Oddities", "markdown")
    assert [(s.heading_path, s.char_start) for s in doc.sections] == [
        ("", 0),
        ("Golang Tips & Oddities", 54),
        ("Golang Tips & Oddities > Maps", 774),
        ("Golang Tips & Oddities > Slices", 995),
        ("Python Tips", 1151),
        ("Python Tips > Default arguments", 1312),
    ]
    assert all(s.page is None for s in doc.sections)
    # Sections tile the file: each is the file text at its offset, and together they are all of it.
    assert "".join(s.text for s in doc.sections) == text
    for s in doc.sections:
        assert text[s.char_start : s.char_start + len(s.text)] == s.text
    assert doc.sections[0].text == "Notes collected while practising interview problems.\n\n"
    # The "#" line inside the fenced block stays in the Maps section instead of starting one.
    assert doc.sections[2].text == (
        "## Maps\n\n"
        "Iteration order over a map is randomised on purpose. "
        "Sort the keys first when the output must be stable.\n\n"
        "```go\n"
        "# this line starts with a hash but it is code, not a heading\n"
        "keys := make([]string, 0, len(m))\n"
        "```\n\n"
    )


def test_russian_markdown_with_tilde_fence() -> None:
    doc = load_markdown(VAULT / TAXES, TAXES)
    assert doc.title == "Налоговые вычеты"
    assert [(s.heading_path, s.char_start, len(s.text)) for s in doc.sections] == [
        ("Налоговые вычеты", 0, 112),
        ("Налоговые вычеты > Имущественный вычет", 112, 565),
        ("Налоговые вычеты > Социальный вычет", 677, 134),
    ]
    assert "## это не заголовок" in doc.sections[1].text
    assert doc.sections[2].text.startswith("## Социальный вычет\n\nСоциальный вычет предоставляется")


def test_markdown_edge_cases(tmp_path: Path) -> None:
    note = tmp_path / "edge.md"
    note.write_text(
        "---\ntags: [go]\n# a YAML comment\n---\n"
        "#tag is not a heading\n"
        "## Closed ##\n"
        "body\n"
        "#### Skipped levels\n"
        "deep\n"
        "# C#\n"
        "   ## Indented\n"
        "    # four spaces is code\n"
        "````\n```\n# still code\n````\n"
        "## After fence\n",
        encoding="utf-8",
    )
    doc = load_markdown(note, "edge.md")
    assert doc.title == "C#"
    assert [s.heading_path for s in doc.sections] == [
        "",
        "Closed",
        "Closed > Skipped levels",
        "C#",
        "C# > Indented",
        "C# > After fence",
    ]
    assert doc.sections[0].text == "---\ntags: [go]\n# a YAML comment\n---\n#tag is not a heading\n"


def test_markdown_without_headings_is_one_section_titled_by_stem(tmp_path: Path) -> None:
    note = tmp_path / "plain note.md"
    note.write_text("just text\n", encoding="utf-8")
    doc = load_markdown(note, "plain note.md")
    assert doc.title == "plain note"
    assert doc.sections == (Section(heading_path="", page=None, text="just text\n", char_start=0),)


def test_chinese_text_is_one_section() -> None:
    doc = load_text(VAULT / CHINESE, CHINESE)
    assert (doc.doc_id, doc.title, doc.kind) == (CHINESE, "说明", "text")
    assert doc.sections == (Section(heading_path="", page=None, text=_file_text(VAULT / CHINESE), char_start=0),)
    assert doc.sections[0].text.startswith("检索增强生成系统先从语料库中检索相关段落")


def test_text_newlines_and_bom_are_normalised(tmp_path: Path) -> None:
    path = tmp_path / "windows.txt"
    path.write_bytes(b"\xef\xbb\xbfline one\r\nline two\rline three")
    assert load_text(path, "windows.txt").sections[0].text == "line one\nline two\nline three"


def test_beir_corpus() -> None:
    docs = load_beir_corpus(FIXTURES / "beir" / "corpus.jsonl")
    assert [(d.doc_id, d.rel_path, d.kind) for d in docs] == [
        ("1", "1", "beir"),
        ("2", "2", "beir"),
        ("3", "3", "beir"),
        ("4", "4", "beir"),
    ]
    assert docs[0].title == "experimental investigation of the aerodynamics of a wing in a slipstream"
    assert docs[0].sections[0].text.startswith(
        "experimental investigation of the aerodynamics of a wing in a slipstream\n\nan experimental study"
    )
    assert docs[1].sections == (
        Section("", None, "simple shear flow past a flat plate in an incompressible fluid of small viscosity .", 0),
    )
    assert docs[2].sections == (Section("", None, "", 0),)  # empty documents are kept
    assert docs[3].title == ""
    assert docs[3].sections[0].text == "the boundary layer in simple shear flow past a flat plate ."


def test_beir_problems_are_reported_together(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        '{"_id": "a", "text": "fine"}\n'
        "{not json\n"
        '{"title": "no id", "text": "x"}\n'
        '{"_id": "a", "text": "again"}\n'
        '{"_id": 7, "title": 3}\n'
        "[1, 2]\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as raised:
        load_beir_corpus(path)
    got = [(p.file, p.line, p.field) for p in raised.value.problems]
    assert got == [
        (str(path), 2, None),
        (str(path), 3, "_id"),
        (str(path), 4, "_id"),
        (str(path), 5, "_id"),
        (str(path), 5, "title"),
        (str(path), 5, "text"),
        (str(path), 6, None),
    ]
    assert "duplicate _id 'a' (first on line 1)" in raised.value.problems[2].message


def test_load_corpus_walks_the_directory_in_sorted_order() -> None:
    docs = load_corpus(VAULT)
    assert [(d.doc_id, d.rel_path, d.kind) for d in docs] == [
        (LEETCODE, LEETCODE, "markdown"),
        (TAXES, TAXES, "markdown"),
        (CHINESE, CHINESE, "text"),
    ]


def test_load_corpus_skips_hidden_and_unknown_files(tmp_path: Path) -> None:
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / ".obsidian" / "workspace.md").write_text("# hidden", encoding="utf-8")
    (tmp_path / ".draft.md").write_text("# hidden", encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "notes.rst").write_text("ignored", encoding="utf-8")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "UPPER.MD").write_text("# Upper", encoding="utf-8")
    (tmp_path / "a.markdown").write_text("# A", encoding="utf-8")
    (tmp_path / "b.txt").write_text("text", encoding="utf-8")
    docs = load_corpus(str(tmp_path))
    assert [(d.rel_path, d.kind) for d in docs] == [
        ("a.markdown", "markdown"),
        ("b.txt", "text"),
        ("b/UPPER.MD", "markdown"),
    ]


def test_load_corpus_reads_a_beir_directory_and_a_single_file() -> None:
    assert [d.doc_id for d in load_corpus(FIXTURES / "beir")] == ["1", "2", "3", "4"]
    [doc] = load_corpus(VAULT / CHINESE)
    assert (doc.rel_path, doc.kind) == ("说明.txt", "text")


def test_empty_or_missing_corpus_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "only.png").write_bytes(b"\x89PNG")
    with pytest.raises(InputError) as raised:
        load_corpus(tmp_path)
    [problem] = raised.value.problems
    assert problem.file == str(tmp_path)
    assert "no documents" in problem.message
    with pytest.raises(InputError) as raised:
        load_corpus(tmp_path / "absent")
    assert raised.value.problems[0].file == str(tmp_path / "absent")
    empty_beir = tmp_path / "beir"
    empty_beir.mkdir()
    (empty_beir / "corpus.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(InputError, match="no documents"):
        load_corpus(empty_beir)


def test_bad_utf8_in_every_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("# Fine", encoding="utf-8")
    (tmp_path / "bad.md").write_bytes(b"# Title\nline two \xff\xfe\n")
    (tmp_path / "cp1251.txt").write_bytes("Налог".encode("cp1251"))
    with pytest.raises(InputError) as raised:
        load_corpus(tmp_path)
    problems = raised.value.problems
    assert [(Path(p.file).name, p.line) for p in problems] == [("bad.md", 2), ("cp1251.txt", 1)]
    assert all("not valid UTF-8" in p.message for p in problems)


def test_corpus_sha256_changes_on_edit_rename_and_addition(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(VAULT, root)
    original = corpus_sha256(root)
    assert original == corpus_sha256(VAULT)  # content and names, not location
    assert len(original) == 64

    (root / "ignored.png").write_bytes(b"\x89PNG")
    (root / ".hidden.md").write_text("# hidden", encoding="utf-8")
    assert corpus_sha256(root) == original  # files load_corpus does not read do not count

    note = root / LEETCODE
    note.write_text(note.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    edited = corpus_sha256(root)
    assert edited != original

    note.rename(root / "Software" / "Go Tips.md")
    renamed = corpus_sha256(root)
    assert renamed not in (original, edited)

    (root / "new.txt").write_text("new", encoding="utf-8")
    assert corpus_sha256(root) not in (original, edited, renamed)


def test_corpus_sha256_of_beir_and_empty(tmp_path: Path) -> None:
    assert corpus_sha256(FIXTURES / "beir") == corpus_sha256(FIXTURES / "beir")
    with pytest.raises(InputError):
        corpus_sha256(tmp_path)



def test_documents_read_back_from_their_table_are_the_documents() -> None:
    docs = load_corpus(Path(__file__).resolve().parents[1] / "data" / "sample" / "corpus")
    assert any(len(d.sections) > 1 for d in docs) and any(s.page is not None for d in docs for s in d.sections)
    assert documents_from_frame(documents_to_frame(docs)) == sorted(docs, key=lambda d: d.doc_id)
