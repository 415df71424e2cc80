"""Snippets for an anchor: short spans that pin a chunk down inside its heading and survive re-chunking.

A snippet is matched case-insensitively with whitespace collapsed (corpus/gold.py), so it is stored with its
whitespace collapsed. It is kept inside one sentence: the chunker cuts at paragraph breaks and sentence ends
first, so a span that crosses neither stays whole in some chunk at any sensible chunk size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_eval_assets.corpus.gold import normalise_for_match

MIN_WORDS, MAX_WORDS = 4, 8
MAX_CHARS = 64
CJK_SPAN_CHARS = 10  # Chinese and Japanese have no spaces: a span is a run of characters
MAX_SNIPPETS = 2

_PIECE_BREAK = re.compile(r"\n|(?<=[.!?;:])\s|(?<=[。！？；：])")
_HAS_WORD = re.compile(r"\w")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_DIGIT = re.compile(r"\d")


def choose_snippets(text: str, avoid: Sequence[str] = ()) -> tuple[str, ...]:
    """Up to two spans of `text` that occur in it exactly once, from different sentences, most distinctive first.

    Spans found in any of `avoid` (the other chunks of the document: neighbours share their overlap) are not
    taken while others remain, so the anchor does not also match the chunk next door. Distinctive: digits, long
    words and capitalised words (names, models, codes) weigh more than short common words. A chunk too short to
    hold a span gives its whole text when that is short, else no snippet.
    """
    haystack = normalise_for_match(text)
    elsewhere = [normalise_for_match(t) for t in avoid]
    clean: list[tuple[float, int, str]] = []
    shared: list[tuple[float, int, str]] = []
    for order, piece in enumerate(_PIECE_BREAK.split(text)):
        once = [span for span in _spans(piece) if _once(normalise_for_match(span), haystack)]
        own = [span for span in once if not any(normalise_for_match(span) in other for other in elsewhere)]
        for found, spans in ((clean, own), (shared, once)):
            if spans:
                best = max(spans, key=_score)
                found.append((_score(best), -order, best))
    best_per_piece = clean or shared
    if not best_per_piece:
        whole = " ".join(text.split())
        return (whole,) if whole and len(whole) <= MAX_CHARS * 2 else ()
    best_per_piece.sort(reverse=True)
    return tuple(span for _, _, span in best_per_piece[:MAX_SNIPPETS])


def _spans(piece: str) -> list[str]:
    words = [w for w in piece.split() if w]
    spans = []
    for size in range(MIN_WORDS, MAX_WORDS + 1):
        for start in range(len(words) - size + 1):
            window = words[start : start + size]
            span = " ".join(window)
            if len(span) <= MAX_CHARS and _HAS_WORD.search(window[0]) and _HAS_WORD.search(window[-1]):
                spans.append(span)
    for word in words:
        if len(_CJK.findall(word)) >= CJK_SPAN_CHARS:
            spans.extend(word[i : i + CJK_SPAN_CHARS] for i in range(len(word) - CJK_SPAN_CHARS + 1))
    return spans


def _once(needle: str, haystack: str) -> bool:
    first = haystack.find(needle)
    return first >= 0 and haystack.find(needle, first + 1) < 0


def _score(span: str) -> float:
    score = 0.0
    for word in span.split():
        core = word.strip(".,;:!?()[]\"'`*_")
        if _DIGIT.search(core):
            score += 2.0
        elif len(_CJK.findall(core)) >= CJK_SPAN_CHARS:
            score += 1.5 + len(set(core)) / CJK_SPAN_CHARS
        elif len(core) >= 7 or (core[:1].isupper() and len(core) > 1):
            score += 1.0
        elif len(core) >= 4:
            score += 0.5
    # Among equally distinctive spans the shorter is kept: it is less likely to meet a chunk boundary.
    return score - len(span) / 1000
