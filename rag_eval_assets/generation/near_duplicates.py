"""Near-duplicate questions and questions that copy their source: character-level text overlap.

Both work on a normalised form (casefolded, every run of non-word characters one space), so punctuation, case and
spacing never make two texts look different.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

_NON_WORD = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", text.casefold()).strip()


def char_trigrams(text: str) -> frozenset[str]:
    """The normalised text's character trigrams (a text shorter than three characters is its own one gram)."""
    s = normalise(text)
    if len(s) < 3:
        return frozenset({s}) if s else frozenset()
    return frozenset(s[i : i + 3] for i in range(len(s) - 2))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b|; two empty sets are identical (1.0)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


@dataclass(frozen=True)
class NearDuplicate:
    index: int  # the dropped text
    kept_index: int  # the earlier text it duplicates
    similarity: float


def near_duplicates(texts: Sequence[str], threshold: float) -> tuple[list[int], list[NearDuplicate]]:
    """(indices kept, duplicates dropped): keep-first in the given order, so the result is deterministic.

    A text is dropped when its trigram Jaccard similarity with an already kept text is >= threshold; it is
    reported against the most similar kept text (the earliest on a tie).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    kept: list[int] = []
    kept_grams: list[frozenset[str]] = []
    dropped: list[NearDuplicate] = []
    for i, text in enumerate(texts):
        grams = char_trigrams(text)
        best, best_sim = -1, -1.0
        for j, other in zip(kept, kept_grams):
            sim = jaccard(grams, other)
            if sim > best_sim:
                best, best_sim = j, sim
        if best >= 0 and best_sim >= threshold:
            dropped.append(NearDuplicate(i, best, best_sim))
        else:
            kept.append(i)
            kept_grams.append(grams)
    return kept, dropped


def longest_copied_span(question: str, source: str) -> str:
    """The longest normalised substring the question shares with the source text, without edge spaces."""
    q, s = normalise(question), normalise(source)
    match = SequenceMatcher(None, q, s, autojunk=False).find_longest_match(0, len(q), 0, len(s))
    return q[match.a : match.a + match.size].strip()
