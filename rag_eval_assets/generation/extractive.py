"""A deterministic answerer with no LLM: the retrieved sentences that best match the question, with citations.

The top-k contexts are split into sentences (after . ! ? … followed by whitespace, after the Chinese 。！？ with or
without it, at blank lines, and before Markdown headings and list items; single line breaks inside a paragraph,
as in PDF text, do not split). Heading lines are not candidates, a sentence repeated by overlapping chunks counts
once (its first occurrence) and a sentence without index terms is dropped.

A sentence's support is the idf-weighted share of the question's distinct terms it contains:
    support(s) = sum(idf(t) for t in Q & terms(s)) / sum(idf(t) for t in Q)
with terms from the retrieval analyzer of the corpus language and idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)) over
the N candidate sentences (BM25's idf, always positive; a question term found in no sentence gets the largest
weight and so lowers every sentence's support). The answer is the best `max_sentences` sentences with support >=
`threshold` (ties broken by context rank, then position), in reading order, each followed by its source label in
brackets: "(стр. 3)" for a PDF page, "(notes/x.md > Heading)" for a note. With no sentence above the threshold the
answerer abstains with reason "low_support" ("no_context" when nothing was retrieved).
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.generation.answers import Answer
from rag_eval_assets.generation.citations import Context
from rag_eval_assets.retrieval.analyzers import get_analyzer

VERSION = "extractive-v1"

_CLOSERS = "\"'»”’)\\]」』）"
_BOUNDARY = re.compile(
    rf"[.!?…]+[{_CLOSERS}]*\s+"  # Latin/Cyrillic sentence end: needs the following space
    rf"|[。！？]+[{_CLOSERS}]*\s*"  # Chinese sentence end: no space follows
    r"|\n\s*\n"  # paragraph break
    r"|\n(?=[ \t]*(?:#|[-*+][ \t]|\d+[.)][ \t]))"  # a line that starts a heading or a list item
)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, each with its whitespace collapsed, in order (see module docstring)."""
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        sentences.append(text[start : match.end()])
        start = match.end()
    sentences.append(text[start:])
    return [s for s in (" ".join(part.split()) for part in sentences) if s]


@dataclass(frozen=True)
class _Candidate:
    context_index: int
    position: int
    text: str
    terms: frozenset[str]


@dataclass(frozen=True)
class ScoredSentence:
    context_index: int  # 0-based position in the contexts (rank order)
    position: int  # 0-based sentence number within its context
    text: str
    support: float


class ExtractiveAnswerer:
    kind = "extractive"
    needs_contexts = True

    def __init__(self, language: str = "multi", threshold: float = 0.3, max_sentences: int = 3):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        self.threshold = threshold
        self.max_sentences = max_sentences
        self._analyzer = get_analyzer(language)

    @property
    def version(self) -> dict[str, Any]:
        return {
            "answerer": VERSION,
            "analyzer": self._analyzer.name,
            "threshold": self.threshold,
            "max_sentences": self.max_sentences,
        }

    def score(self, question: str, contexts: list[Context]) -> list[ScoredSentence]:
        """Every candidate sentence with its support, best first (ties: context rank, then position)."""
        candidates = self._candidates(contexts)
        q_terms = set(self._analyzer(question))
        if not candidates or not q_terms:
            return []
        df = Counter(t for c in candidates for t in c.terms)
        n = len(candidates)
        idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in q_terms}
        total = sum(idf.values())
        scored = [
            ScoredSentence(c.context_index, c.position, c.text, sum(idf[t] for t in q_terms & c.terms) / total)
            for c in candidates
        ]
        return sorted(scored, key=lambda s: (-s.support, s.context_index, s.position))

    def answer_many(self, questions: list[Question], contexts: list[list[Context]], k: int) -> list[Answer]:
        return [self._answer(q, ctx) for q, ctx in zip(questions, contexts, strict=True)]

    def _answer(self, question: Question, contexts: list[Context]) -> Answer:
        started = time.perf_counter()
        ranked = self.score(question.question, contexts)
        chosen = [s for s in ranked[: self.max_sentences] if s.support >= self.threshold]
        if not chosen:
            reason = "low_support" if contexts else "no_context"
            return Answer.local(contexts, "", [], True, reason, time.perf_counter() - started)
        chosen.sort(key=lambda s: (s.context_index, s.position))  # reading order
        text = " ".join(f"{s.text} ({contexts[s.context_index].label})" for s in chosen)
        cited = list(dict.fromkeys(s.context_index for s in chosen))
        citations = [contexts[i].citation() for i in cited]
        return Answer.local(contexts, text, citations, False, None, time.perf_counter() - started)

    def _candidates(self, contexts: list[Context]) -> list[_Candidate]:
        seen: set[str] = set()
        out = []
        for ci, context in enumerate(contexts):
            for position, sentence in enumerate(split_sentences(context.text)):
                if sentence.startswith("#") or sentence in seen:
                    continue
                seen.add(sentence)
                terms = frozenset(self._analyzer(sentence))
                if terms:
                    out.append(_Candidate(ci, position, sentence, terms))
        return out
