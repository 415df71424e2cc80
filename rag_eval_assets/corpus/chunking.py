"""Character-window chunking inside Sections, with stable ids and token counts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pandas as pd

from rag_eval_assets.corpus.ids import chunk_id
from rag_eval_assets.corpus.model import CHUNK_COLUMNS, Document

CHUNKER_VERSION = "chars-v1"

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# ASCII sentence ends need a following space ("3.14", "e.g.x" are not ends); CJK full stops are
# unambiguous and CJK text puts no space after them.
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")
_WHITESPACE = re.compile(r"\s")
_WORD_START = re.compile(r"(?<=\s)\S")
_NON_SPACE = re.compile(r"\S")
# Han ideographs (with extensions and compatibility forms) and kana: one token per character.
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
# Around CJK characters, CJK and full-width punctuation separates tokens and is not one.
_CJK_SEPARATOR = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f\u3000-\u303f\uff00-\uffef]"
)


@dataclass(frozen=True)
class ChunkerParams:
    chunk_size_chars: int = 800
    overlap_chars: int = 100

    def __post_init__(self) -> None:
        if self.chunk_size_chars <= 0:
            raise ValueError(f"chunk_size_chars must be > 0, got {self.chunk_size_chars}")
        if not 0 <= self.overlap_chars < self.chunk_size_chars:
            raise ValueError(
                f"overlap_chars must be >= 0 and < chunk_size_chars ({self.chunk_size_chars}), "
                f"got {self.overlap_chars}"
            )


def chunk_documents(docs: list[Document], corpus_id: str, params: ChunkerParams) -> pd.DataFrame:
    """One row per chunk, columns CHUNK_COLUMNS in order, documents and sections in input order.

    A chunk never crosses a Section. Within one, windows of at most chunk_size_chars characters
    end at the last paragraph break in the window's later part (past half the size and past the
    overlap), else its last sentence end there, else its last whitespace, else at the size limit.
    The next window starts about overlap_chars before that end, at the first word start in the
    overlap (mid-word only when the overlap holds no word start). Chunk text is stripped; char_start
    and char_end locate it in the document's full text; whitespace-only text gives no chunk.
    Identical (corpus, file, heading, text) would give one id twice: later ones get "-2", "-3".
    """
    rows: dict[str, list] = {column: [] for column in CHUNK_COLUMNS}
    uses: dict[str, int] = {}
    for doc in docs:
        chunk_index = 0
        for section in doc.sections:
            for start, end in _windows(section.text, params.chunk_size_chars, params.overlap_chars):
                text = section.text[start:end]
                base_id = chunk_id(corpus_id, doc.rel_path, section.heading_path, text)
                uses[base_id] = uses.get(base_id, 0) + 1
                rows["chunk_id"].append(base_id if uses[base_id] == 1 else f"{base_id}-{uses[base_id]}")
                rows["doc_id"].append(doc.doc_id)
                rows["corpus_id"].append(corpus_id)
                rows["rel_path"].append(doc.rel_path)
                rows["heading_path"].append(section.heading_path)
                rows["page"].append(section.page)
                rows["chunk_index"].append(chunk_index)
                rows["text"].append(text)
                rows["char_start"].append(section.char_start + start)
                rows["char_end"].append(section.char_start + end)
                rows["n_tokens"].append(count_tokens(text))
                chunk_index += 1
    dtypes = {"page": "Int64", "chunk_index": "int64", "char_start": "int64", "char_end": "int64", "n_tokens": "int64"}
    return pd.DataFrame({column: pd.Series(rows[column], dtype=dtypes.get(column, "str")) for column in CHUNK_COLUMNS})


def count_tokens(text: str) -> int:
    """Whitespace-separated tokens; with CJK, each CJK character counts as one token as well.

    Chinese and Japanese put no spaces between words, so a whitespace count would call a whole
    paragraph one token.
    """
    cjk = len(_CJK_CHAR.findall(text))
    if not cjk:
        return len(text.split())
    return cjk + len(_CJK_SEPARATOR.sub(" ", text).split())


def _windows(text: str, size: int, overlap: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each stripped chunk of `text`."""
    text_end = len(text.rstrip())
    start = _skip_space(text, 0)
    while start < text_end:
        cut = text_end if text_end - start <= size else _cut(text, start, size, overlap)
        end = cut
        while text[end - 1].isspace():
            end -= 1
        yield start, end
        if cut >= text_end:
            return
        start = _next_start(text, start, cut, overlap)


def _cut(text: str, start: int, size: int, overlap: int) -> int:
    """Where the window starting at `start` ends: the best break in its later part.

    Breaks before `earliest` are not used: they would make short chunks, and a cut at most
    overlap_chars after `start` would not move the next window forward.
    """
    limit = start + size
    earliest = start + max(size // 2, overlap + 1)
    # endpos limit + 1: a break may begin at `limit` itself, and "." needs to see the next char.
    paragraph = _last(_PARAGRAPH_BREAK.finditer(text, earliest, limit + 1))
    if paragraph is not None:
        return paragraph.start()
    sentence = _last(m for m in _SENTENCE_END.finditer(text, earliest, limit + 1) if m.end() <= limit)
    if sentence is not None:
        return sentence.end()
    space = _last(_WHITESPACE.finditer(text, earliest, limit + 1))
    if space is not None:
        return space.start()
    return limit


def _next_start(text: str, start: int, cut: int, overlap: int) -> int:
    """The next window's start: the first word start in the overlap, else the overlap's edge."""
    if overlap == 0:
        return _skip_space(text, cut)
    lower = max(cut - overlap, start + 1)
    word = _WORD_START.search(text, lower, cut)
    return word.start() if word is not None else _skip_space(text, lower)


def _skip_space(text: str, i: int) -> int:
    found = _NON_SPACE.search(text, i)
    return found.start() if found is not None else len(text)


def _last(matches: Iterable[re.Match[str]]) -> re.Match[str] | None:
    found = None
    for found in matches:
        pass
    return found
