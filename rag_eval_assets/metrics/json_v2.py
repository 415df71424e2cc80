"""Seed 003's score of a structured JSON answer against `expected.answer_example` (0-100), and its dev gate.

Decisions the seed leaves open (docs/metrics.md lists them with the formulas): the answer must be one JSON object
and nothing else (whitespace around it is allowed, a ```json fence is not); extra keys are ignored; the "at most 8 /
5 items" of the seed's output format are not schema checks, the [:12] / [:10] caps are what stops padding; strings
are compared after removing all whitespace; a match needs two non-empty strings.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_eval_assets.evalset.formats.seed003 import ANSWER_LIST_FIELDS, ANSWER_TEXT_FIELDS
from rag_eval_assets.metrics.normalise import squash

JSON_V2_SCORE = "json_v2_score"  # the metric: the weighted total of the parts as a percentage
TOP_SCORE = 100.0
CATEGORY_FIELDS = ("target_audience", "main_topic", "sub_topic")
WEIGHTS = {
    "target_audience": 0.10,
    "main_topic": 0.10,
    "sub_topic": 0.10,
    "detailed_description_f1": 0.30,
    "original_evidence": 0.20,
    "predicted_questions_f1": 0.10,
    "grounding": 0.10,
}
JACCARD_THRESHOLD = 0.72
DESCRIPTION_CAP = 12
QUESTIONS_CAP = 10
EVIDENCE_KEYWORDS = 30
EVIDENCE_FULL_HITS = 8
EVIDENCE_MIN_CHARS = 40
MAX_ENTRIES, MAX_REFS, MAX_ANCHORS = 12, 6, 6
# English tokens of one character ("a", "I", a lone digit) carry no evidence.
MIN_ENGLISH_TOKEN = 2
_ENGLISH = re.compile(r"[a-z0-9]+")
# A keyword is an English token or a pair of adjacent Han characters (CJK Unified Ideographs, Extension A and the
# compatibility block); bigrams do not cross a non-Han character.
_KEYWORD = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


@dataclass(frozen=True)
class JsonV2Score:
    schema_ok: bool
    parts: dict[str, float] = field(default_factory=dict)  # empty when schema_ok is False
    total: float = 0.0  # 0..1
    score: float = 0.0  # 100 * total
    schema_error: str | None = None


@dataclass(frozen=True)
class GateResult:
    passed: bool
    eval_score_avg: float
    schema_pass_rate: float
    n: int


def score_json_v2(
    expected: Mapping[str, Any],
    answer_text: str,
    contexts: Sequence[Mapping[str, str]],
    abstained: bool = False,
    abstention_expected: bool = False,
) -> JsonV2Score:
    """`expected` is the question's answer_example; `contexts` the retrieved chunks the answer was given, each
    {"source_path", "text"}, in rank order.

    An abstained answer fails the schema (score 0), as an empty one does, even when its text is a valid object; when the question expects abstention it scores 100 with every part 1."""
    if abstained and abstention_expected:
        return JsonV2Score(schema_ok=True, parts={name: 1.0 for name in WEIGHTS}, total=1.0, score=TOP_SCORE)
    if abstained:
        return JsonV2Score(schema_ok=False, schema_error="no answer: the answer abstained")
    got, error = parse_answer(answer_text)
    if got is None:
        return JsonV2Score(schema_ok=False, schema_error=error)
    parts = {name: float(fuzzy_match(expected[name], got[name])) for name in CATEGORY_FIELDS}
    parts["detailed_description_f1"] = list_f1(
        expected["detailed_description"], got["detailed_description"][:DESCRIPTION_CAP]
    )
    parts["original_evidence"] = evidence_score(expected["original_evidence"], got["original_evidence"])
    parts["predicted_questions_f1"] = list_f1(
        expected["predicted_questions"], got["predicted_questions"][:QUESTIONS_CAP]
    )
    parts["grounding"] = grounding(got["source_map"], contexts)
    total = min(1.0, max(0.0, sum(WEIGHTS[name] * value for name, value in parts.items())))
    return JsonV2Score(schema_ok=True, parts=parts, total=total, score=TOP_SCORE * total)


def parse_answer(answer_text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the answer object, None) or (None, why it fails the schema)."""
    try:
        got = json.loads(answer_text.strip())
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc}"
    if not isinstance(got, dict):
        return None, f"not a JSON object but {type(got).__name__}"
    required = (*ANSWER_TEXT_FIELDS, *ANSWER_LIST_FIELDS, "source_map")
    problems = [f"missing field {name!r}" for name in required if name not in got]
    problems += [
        f"{name!r} is not a string" for name in ANSWER_TEXT_FIELDS if name in got and not isinstance(got[name], str)
    ]
    problems += [
        f"{name!r} is not a list of strings"
        for name in ANSWER_LIST_FIELDS
        if name in got and not (isinstance(got[name], list) and all(isinstance(x, str) for x in got[name]))
    ]
    if "source_map" in got and not isinstance(got["source_map"], list):
        problems.append("'source_map' is not a list")
    return (None, "; ".join(problems)) if problems else (got, None)


def fuzzy_match(expected: str, got: str) -> bool:
    """Seed 003 3.1: after removing whitespace, one string contains the other or their character-bigram Jaccard
    is >= 0.72. An empty string matches nothing (it is a substring of everything)."""
    e, g = squash(expected), squash(got)
    if not e or not g:
        return False
    return e in g or g in e or bigram_jaccard(e, g) >= JACCARD_THRESHOLD


def bigram_jaccard(a: str, b: str) -> float:
    """|bigrams(a) & bigrams(b)| / |bigrams(a) | bigrams(b)| over sets of adjacent character pairs; a one-character
    string is its own single "bigram"."""
    sa, sb = _bigrams(a), _bigrams(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def _bigrams(s: str) -> set[str]:
    if len(s) > 1:
        return {s[i : i + 2] for i in range(len(s) - 1)}
    return {s} if s else set()


def list_f1(expected: Sequence[str], got: Sequence[str]) -> float:
    """Seed 003 3.2/3.3 on an already capped `got`: recall = expected items matching some got item / len(expected),
    precision = got items matching some expected item / len(got), F1 = 2PR/(P+R). Items empty after removing
    whitespace are dropped first; two empty lists agree (1.0), one empty list scores 0."""
    exp = [e for e in expected if squash(e)]
    out = [g for g in got if squash(g)]
    if not exp and not out:
        return 1.0
    if not exp or not out:
        return 0.0
    recall = sum(any(fuzzy_match(e, g) for g in out) for e in exp) / len(exp)
    precision = sum(any(fuzzy_match(e, g) for e in exp) for g in out) / len(out)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def keywords(text: str) -> list[str]:
    """Seed 003 3.4 keywords in order of first appearance, without repeats: lowercased English tokens ([a-z0-9]+,
    at least 2 characters) and the bigrams of each run of Han characters."""
    found: list[str] = []
    for run in _KEYWORD.findall(text.lower()):
        if run.isascii():
            if len(run) >= MIN_ENGLISH_TOKEN:
                found.append(run)
        else:
            found.extend(run[i : i + 2] for i in range(len(run) - 1))
    return list(dict.fromkeys(found))


def evidence_score(expected: str, got: str) -> float:
    """min(1, hit/8) * (1 if len(got) >= 40 else len(got)/40); hit = how many of expected's first 30 keywords are
    keywords of got. len counts the characters of got as given."""
    got_keywords = set(keywords(got))
    hit = sum(k in got_keywords for k in keywords(expected)[:EVIDENCE_KEYWORDS])
    length_penalty = 1.0 if len(got) >= EVIDENCE_MIN_CHARS else len(got) / EVIDENCE_MIN_CHARS
    return min(1.0, hit / EVIDENCE_FULL_HITS) * length_penalty


def grounding(source_map: Sequence[Any], contexts: Sequence[Mapping[str, str]]) -> float:
    """ok_refs / total_refs over the first 12 entries, 6 refs per entry, 6 anchors per ref; 0 when there is no ref.

    An entry is {"refs": [ref, ...]} or a ref itself ({"file", "page"?, "anchors"}). A ref is ok when its file is
    exactly the source_path of one of the contexts and one of its anchors, whitespace removed, occurs in the contexts'
    texts joined by newlines, whitespace removed. A malformed ref (not an object, no string file) counts, not ok."""
    files = {c["source_path"] for c in contexts}
    context_text = squash("\n".join(c["text"] for c in contexts))
    refs = [ref for entry in source_map[:MAX_ENTRIES] for ref in _entry_refs(entry)]
    if not refs:
        return 0.0
    return sum(_ref_ok(ref, files, context_text) for ref in refs) / len(refs)


def _entry_refs(entry: Any) -> list[Any]:
    if isinstance(entry, dict) and "refs" in entry:
        refs = entry["refs"]
        return refs[:MAX_REFS] if isinstance(refs, list) else [None]
    return [entry]


def _ref_ok(ref: Any, files: set[str], context_text: str) -> bool:
    if not isinstance(ref, dict) or not isinstance(ref.get("file"), str) or ref["file"] not in files:
        return False
    anchors = ref.get("anchors")
    if not isinstance(anchors, list):
        return False
    return any(isinstance(a, str) and squash(a) and squash(a) in context_text for a in anchors[:MAX_ANCHORS])


def dev_gate(scores: Sequence[JsonV2Score], min_avg: float = 95.0, min_schema: float = 0.98) -> GateResult:
    """Seed 003 section 5 over scored answers; see `gate_from_values`."""
    return gate_from_values([s.score for s in scores], [s.schema_ok for s in scores], min_avg, min_schema)


def gate_from_values(
    scores: Sequence[float], schema_ok: Sequence[bool], min_avg: float = 95.0, min_schema: float = 0.98
) -> GateResult:
    """Seed 003 section 5: passed when the mean score (schema failures count as 0) is >= min_avg and the share of
    schema_ok answers is >= min_schema. No answers: not passed, NaN averages."""
    n = len(scores)
    if n == 0:
        return GateResult(passed=False, eval_score_avg=math.nan, schema_pass_rate=math.nan, n=0)
    avg = sum(scores) / n
    rate = sum(bool(ok) for ok in schema_ok) / n
    return GateResult(passed=avg >= min_avg and rate >= min_schema, eval_score_avg=avg, schema_pass_rate=rate, n=n)
