"""Unicode text normalisation shared by the answer metrics (rule matching, JSON v2 matching, text overlap)."""

from __future__ import annotations

import re
import unicodedata

_WHITESPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    """The form rule matching compares: NFKC (full-width letters and digits become ASCII, ligatures
    split), casefold (Unicode lowercase, also ß -> ss), ё -> е (Russian texts spell "расчёт" and "расчет"
    alike), and every run of whitespace one space, ends stripped."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("ё", "е")
    return _WHITESPACE.sub(" ", folded).strip()


def squash(text: str) -> str:
    """The text with all whitespace removed (seed 003's 去空白正規化): a line break a PDF extractor put inside a
    Chinese sentence, or a space an answer put around a word, does not stop a match."""
    return _WHITESPACE.sub("", text)


def strip_symbols(text: str) -> str:
    """Seed 004's normalisation: `fold`, then every punctuation or symbol character (Unicode categories P* and S*)
    becomes a space, and spaces collapse. A space, not nothing, so "3.5" stays two numbers and "из-за" two words."""
    spaced = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in fold(text))
    return _WHITESPACE.sub(" ", spaced).strip()
