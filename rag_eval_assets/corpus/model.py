"""Documents as loaded and chunks as indexed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """A span a chunk may never cross: a Markdown section, a PDF page, a whole text file."""

    heading_path: str  # normalised, components joined by " > ", "" before the first heading
    page: int | None  # 1-based PDF page, None elsewhere
    text: str
    char_start: int  # offset of `text` in the document's full text


@dataclass(frozen=True)
class Document:
    doc_id: str  # rel_path for files, _id for BEIR
    rel_path: str  # POSIX path relative to the corpus root ("" never)
    title: str
    kind: str  # "markdown" | "pdf" | "text" | "beir"
    sections: tuple[Section, ...]


# One row per chunk in the `chunks` asset, in this column order.
CHUNK_COLUMNS = (
    "chunk_id",
    "doc_id",
    "corpus_id",
    "rel_path",
    "heading_path",
    "page",
    "chunk_index",
    "text",
    "char_start",
    "char_end",
    "n_tokens",
)
