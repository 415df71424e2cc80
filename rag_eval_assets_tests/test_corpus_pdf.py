from __future__ import annotations

from pathlib import Path

import pytest
from fpdf import FPDF

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.corpus.model import Section
from rag_eval_assets.corpus.pdf import PAGE_SEPARATOR, load_pdf
from rag_eval_assets.errors import InputError

REPORT_PAGES = (
    "Annual report 2023.\nRevenue was 12 million dollars, up from 9 million in 2022.",
    "Risks.\nThe main risk is currency exposure.\nHedging covers half of it.",
    "Outlook.\nGrowth is expected to continue in 2024.",
)


def write_pdf(path: Path, pages: tuple[str, ...], title: str | None = None) -> Path:
    """A PDF with one page per string, in a core font (an empty string gives a page without text)."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 8, text)
    if title:
        pdf.set_title(title)
    pdf.output(str(path))
    return path


def test_pdf_has_one_section_per_page(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "report.pdf", REPORT_PAGES, title="Annual Report")
    doc = load_pdf(path, "reports/report.pdf")
    assert (doc.doc_id, doc.rel_path, doc.title, doc.kind) == (
        "reports/report.pdf",
        "reports/report.pdf",
        "Annual Report",
        "pdf",
    )
    first, second, _ = (len(t) + len(PAGE_SEPARATOR) for t in REPORT_PAGES)
    assert doc.sections == (
        Section(heading_path="", page=1, text=REPORT_PAGES[0], char_start=0),
        Section(heading_path="", page=2, text=REPORT_PAGES[1], char_start=first),
        Section(heading_path="", page=3, text=REPORT_PAGES[2], char_start=first + second),
    )


def test_pdf_title_defaults_to_the_file_stem(tmp_path: Path) -> None:
    assert load_pdf(write_pdf(tmp_path / "untitled.pdf", ("Some text.",)), "untitled.pdf").title == "untitled"


def test_page_without_text_is_kept_and_gives_no_chunk(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "scan.pdf", ("First page.", "", "Third page."))
    doc = load_pdf(path, "scan.pdf")
    assert [(s.page, s.text) for s in doc.sections] == [(1, "First page."), (2, ""), (3, "Third page.")]
    chunks = chunk_documents([doc], "c", ChunkerParams())
    assert chunks["page"].tolist() == [1, 3]
    assert chunks["text"].tolist() == ["First page.", "Third page."]


def test_pdf_chunks_never_span_pages(tmp_path: Path) -> None:
    doc = load_pdf(write_pdf(tmp_path / "report.pdf", REPORT_PAGES), "report.pdf")
    full_text = PAGE_SEPARATOR.join(REPORT_PAGES)
    chunks = chunk_documents([doc], "c", ChunkerParams(chunk_size_chars=40, overlap_chars=10))
    assert sorted(set(chunks["page"])) == [1, 2, 3]
    for row in chunks.itertuples():
        assert full_text[row.char_start : row.char_end] == row.text
        assert row.text in REPORT_PAGES[row.page - 1]


@pytest.mark.parametrize(
    "content",
    [b"", b"this is not a PDF", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog"],
    ids=["empty", "not-pdf", "truncated"],
)
def test_unreadable_pdf_is_an_input_error_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(content)
    with pytest.raises(InputError) as raised:
        load_pdf(path, "broken.pdf")
    [problem] = raised.value.problems
    assert problem.file == str(path)
    assert problem.message.startswith("cannot read PDF")


def test_corrupt_pdf_is_reported_with_the_other_files(tmp_path: Path) -> None:
    write_pdf(tmp_path / "good.pdf", REPORT_PAGES)
    half = (tmp_path / "good.pdf").read_bytes()
    (tmp_path / "cut.pdf").write_bytes(half[: len(half) // 3])
    (tmp_path / "bad.txt").write_bytes(b"\xff")
    with pytest.raises(InputError) as raised:
        load_corpus(tmp_path)
    assert [Path(p.file).name for p in raised.value.problems] == ["bad.txt", "cut.pdf"]
