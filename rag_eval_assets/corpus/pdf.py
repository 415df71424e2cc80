"""PDF files through pypdf: one Section per page, so a chunk never spans two pages."""

from __future__ import annotations

from pathlib import Path

from pypdf import PdfReader

from rag_eval_assets.corpus.model import Document, Section
from rag_eval_assets.errors import InputError, InputProblem

# The document's full text is its page texts joined by a form feed (pdftotext's page separator);
# Section.char_start counts in that text.
PAGE_SEPARATOR = "\f"


def load_pdf(path: Path, rel_path: str) -> Document:
    """One Section per page: page = 1-based page number, heading_path "".

    A page without extractable text (a scan, a figure) is kept as an empty Section so page numbers
    stay aligned with the file; the chunker skips it. An unreadable, corrupt or encrypted file
    raises InputError naming it (and the page, when one page's content is what fails).
    """
    page_number = 0  # the page being read when something fails, 0 before the first
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValueError("the PDF is encrypted with a password")
        title = (reader.metadata.title if reader.metadata else None) or path.stem
        pages = []
        for page_number, page in enumerate(reader.pages, start=1):
            pages.append(page.extract_text() or "")
    # pypdf reports malformed input through assorted built-in exceptions as well as PyPdfError:
    # whatever it raises, the file cannot be read.
    except Exception as e:
        where = f" (page {page_number})" if page_number else ""
        message = f"cannot read PDF{where}: {str(e) or type(e).__name__}"
        problem = InputProblem(str(path), None, "page" if page_number else None, message)
        raise InputError([problem]) from e

    sections = []
    offset = 0
    for number, text in enumerate(pages, start=1):
        sections.append(Section(heading_path="", page=number, text=text, char_start=offset))
        offset += len(text) + len(PAGE_SEPARATOR)
    return Document(doc_id=rel_path, rel_path=rel_path, title=str(title), kind="pdf", sections=tuple(sections))
