"""Plain text files, and the UTF-8 reading every text-based loader shares."""

from __future__ import annotations

from pathlib import Path

from rag_eval_assets.corpus.model import Document, Section
from rag_eval_assets.errors import InputError, InputProblem


def read_utf8(path: Path) -> str:
    """The file's text: UTF-8 (a BOM is dropped), newlines normalised to "\\n" like open() does.

    Offsets in Sections count characters of this text. Undecodable bytes raise InputError naming
    the file and the line of the first bad byte.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError([InputProblem(str(path), None, None, f"cannot read file: {e.strerror or e}")]) from e
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        problem = InputProblem(str(path), line, None, f"not valid UTF-8 (byte offset {e.start}: {e.reason})")
        raise InputError([problem]) from e
    return text.replace("\r\n", "\n").replace("\r", "\n")


def load_text(path: Path, rel_path: str) -> Document:
    """A text file is one Section: it has no structure a chunk must respect."""
    text = read_utf8(path)
    return Document(
        doc_id=rel_path,
        rel_path=rel_path,
        title=path.stem,
        kind="text",
        sections=(Section(heading_path="", page=None, text=text, char_start=0),),
    )
