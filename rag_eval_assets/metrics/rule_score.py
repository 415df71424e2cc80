"""Seed 000's rule score: required phrases, OR-groups, forbidden phrases, a page citation, a weighted run score.

Matching is substring presence after `normalise.fold` on both sides (case, Unicode form, ё/е and whitespace runs do
not matter). The formulas are the seed's section 5, tabulated in docs/metrics.md, for every answer with text, a refusal
included (a question that wants to punish "не знаю" lists it in its own must_not_include). An empty answer is the one
exception: read literally, a question with only must_not_include rules would give it 1.0 (nothing forbidden said).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.generation.settings import DEFAULT_CITATION_PATTERN
from rag_eval_assets.metrics.normalise import fold

CITATION_PENALTY = 0.2
INCLUDE_WEIGHT = 0.7
SAFE_WEIGHT = 0.3


@dataclass(frozen=True)
class RuleScore:
    include_rate: float
    safe_ok: float
    base_score: float
    citation_ok: bool  # the answer holds a page citation (reported whether or not one was required)
    citation_penalty: float
    question_score: float
    include_hits: int
    include_total: int
    missing: tuple[str, ...]  # must_include items absent, then unmatched OR-groups written "a | b"
    forbidden: tuple[str, ...]  # must_not_include items present


RULE_FIELDS = ("must_include", "must_include_any", "must_not_include", "require_citation")


def has_rules(question: Question) -> bool:
    """Seed 000's score applies only to a question with at least one rule; for any other it is not applicable."""
    return bool(question.must_include or question.must_include_any or question.must_not_include
                or question.require_citation)


def score_rules(
    question: Question,
    answer: str,
    citation_pattern: str | re.Pattern[str] = DEFAULT_CITATION_PATTERN,
) -> RuleScore:
    """One question's score. The citation pattern is searched in the folded answer, case-insensitively, so a
    pattern written in lowercase ASCII also finds full-width or capitalised forms.

    An empty (whitespace-only) answer says nothing and scores 0 on every rule, whatever the question expects (its
    abstention metrics say whether saying nothing was right); a refusal has text and gets the formula."""
    if not answer.strip():
        return _empty_answer_score(question)
    text = fold(answer)
    missing = [item for item in question.must_include if fold(item) not in text]
    missing += [" | ".join(group) for group in question.must_include_any if not any(fold(m) in text for m in group)]
    total = len(question.must_include) + len(question.must_include_any)
    hits = total - len(missing)
    include_rate = hits / total if total else 1.0
    forbidden = tuple(item for item in question.must_not_include if fold(item) in text)
    safe_ok = 0.0 if forbidden else 1.0
    base = INCLUDE_WEIGHT * include_rate + SAFE_WEIGHT * safe_ok
    pattern = citation_pattern if isinstance(citation_pattern, re.Pattern) else re.compile(citation_pattern, re.I)
    citation_ok = pattern.search(text) is not None
    penalty = CITATION_PENALTY if question.require_citation and not citation_ok else 0.0
    return RuleScore(
        include_rate=include_rate,
        safe_ok=safe_ok,
        base_score=base,
        citation_ok=citation_ok,
        citation_penalty=penalty,
        question_score=max(0.0, base - penalty),
        include_hits=hits,
        include_total=total,
        missing=tuple(missing),
        forbidden=forbidden,
    )


def _empty_answer_score(question: Question) -> RuleScore:
    missing = (*question.must_include, *(" | ".join(group) for group in question.must_include_any))
    total = len(missing)
    penalty = CITATION_PENALTY if question.require_citation else 0.0
    return RuleScore(0.0, 0.0, 0.0, False, penalty, 0.0, 0, total, missing, ())


WEIGHTED_SCORE = "weighted_score"  # the run-level metric: weighted_score over the questions' question_score


def weighted_score(scores: Sequence[float], weights: Sequence[float]) -> float:
    """sum(score_i * w_i) / sum(w_i); NaN for no questions."""
    if len(scores) != len(weights):
        raise ValueError(f"{len(scores)} scores but {len(weights)} weights")
    if any(not w > 0 for w in weights):
        raise ValueError("weights must be > 0")
    if not scores:
        return math.nan
    return sum(s * w for s, w in zip(scores, weights)) / sum(weights)
