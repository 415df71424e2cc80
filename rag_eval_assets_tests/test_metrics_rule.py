"""Seed 000's rule score, written out by hand: the seed's own example question, OR-groups, the citation penalty, the
weighted run score, and the invariances the matching promises (case, Unicode form, ё/е, whitespace)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.metrics.normalise import fold
from rag_eval_assets.metrics.rule_score import score_rules, weighted_score


def q(**fields) -> Question:
    return Question(id=fields.pop("id", "q001"), question="Какая выручка за 2023 год?", format="seed000", **fields)


# The seed's example line: {"id":"q001", "must_include":["2023"], "must_not_include":["XX","??"], "weight":1.0}
SEED_EXAMPLE = q(must_include=("2023",), must_not_include=("XX", "??"), weight=1.0)


@pytest.mark.parametrize(
    ("answer", "include_rate", "safe_ok", "question_score"),
    [
        # 0.7 * 1 + 0.3 * 1
        ("Выручка за 2023 год составила 5 млрд руб.", 1.0, 1.0, 1.0),
        # "2023" present, "XX" present: 0.7 * 1 + 0.3 * 0
        ("Выручка за 2023 год: XX млрд руб.", 1.0, 0.0, 0.7),
        # nothing required present, nothing forbidden: 0.7 * 0 + 0.3 * 1
        ("Выручка выросла.", 0.0, 1.0, 0.3),
        # "??" present and "2023" absent: 0
        ("Выручка ?? неизвестна", 0.0, 0.0, 0.0),
        # "xx" is "XX" once folded: the match ignores case
        ("В 2023 году выручка xx", 1.0, 0.0, 0.7),
    ],
)
def test_seed_example_question(answer: str, include_rate: float, safe_ok: float, question_score: float) -> None:
    score = score_rules(SEED_EXAMPLE, answer)
    assert (score.include_rate, score.safe_ok) == (include_rate, safe_ok)
    assert score.base_score == pytest.approx(question_score)
    assert score.question_score == pytest.approx(question_score)
    assert score.citation_penalty == 0.0  # no citation required


def test_or_groups_count_once_each_and_the_detail_names_what_is_missing() -> None:
    question = q(must_include=("выручка",), must_include_any=(("млрд", "миллиард"), ("рубл", "руб.")))
    score = score_rules(question, "Выручка: 5 миллиардов долларов")
    # include_total = 1 item + 2 groups = 3; hits = "выручка" + group 1 ("миллиард" inside "миллиардов") = 2
    assert (score.include_hits, score.include_total) == (2, 3)
    assert score.include_rate == pytest.approx(2 / 3)
    assert score.question_score == pytest.approx(0.7 * 2 / 3 + 0.3)
    assert score.missing == ("рубл | руб.",)
    assert score.forbidden == ()


def test_no_groups_means_include_rate_one() -> None:
    score = score_rules(q(), "любой ответ")
    assert (score.include_total, score.include_rate, score.question_score) == (0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # 0.7 + 0.3 = 1.0, cited: no penalty
        ("Выручка 2023 года — 5 млрд (стр. 12).", 1.0),
        ("Выручка 2023 года — 5 млрд, стр.12", 1.0),
        ("Выручка 2023 года — 5 млрд (СТР. 12-14)", 1.0),
        # not a citation: 1.0 - 0.2
        ("Выручка 2023 года — 5 млрд (стр 12)", 0.8),
        ("Выручка 2023 года — 5 млрд (страница 12)", 0.8),
        ("Выручка 2023 года — пестр. 12", 0.8),
        # 0.3 - 0.2
        ("Выручка неизвестна", 0.1),
        # 0.0 - 0.2 clamps at 0
        ("?? неизвестно", 0.0),
    ],
)
def test_citation_penalty(answer: str, expected: float) -> None:
    question = q(must_include=("2023",), must_not_include=("??",), require_citation=True)
    score = score_rules(question, answer)
    assert score.question_score == pytest.approx(expected)
    assert score.citation_penalty == (0.0 if score.citation_ok else 0.2)


def test_citation_is_reported_but_not_penalised_when_not_required() -> None:
    score = score_rules(q(), "Ответ без ссылки")
    assert (score.citation_ok, score.citation_penalty, score.question_score) == (False, 0.0, 1.0)


@pytest.mark.parametrize(
    ("pattern", "answer", "cited"),
    [
        (r"(?<!\w)p\.\s*\d+", "Revenue was $5bn (p. 12).", True),
        (r"(?<!\w)p\.\s*\d+", "Revenue was $5bn (P.12).", True),
        (r"(?<!\w)p\.\s*\d+", "Revenue was $5bn (page 12).", False),
        (r"第\s*\d+\s*[页頁]", "营收为五十亿元（见第12页）。", True),
        # NFKC turns full-width digits into ASCII before the pattern runs
        (r"第\s*\d+\s*[页頁]", "營收為五十億元（見第１２頁）。", True),
        (re.compile(r"第\s*\d+\s*页"), "营收为五十亿元。", False),
    ],
)
def test_other_citation_patterns(pattern: str | re.Pattern[str], answer: str, cited: bool) -> None:
    score = score_rules(q(require_citation=True), answer, citation_pattern=pattern)
    assert score.citation_ok is cited
    assert score.question_score == pytest.approx(1.0 if cited else 0.8)


@pytest.mark.parametrize(
    ("needle", "answer"),
    [
        ("расчёт", "Расчет выполнен"),  # ё folds to е
        ("Расчет", "РАСЧЁТ выполнен"),
        ("2023", "В ２０２３ году"),  # full-width digits
        ("5 млрд", "Итого 5\n\t млрд"),  # whitespace runs
        ("Straße", "STRASSE 5"),  # casefold, not lower
    ],
)
def test_matching_folds_case_unicode_and_whitespace(needle: str, answer: str) -> None:
    assert score_rules(q(must_include=(needle,)), answer).include_rate == 1.0


def test_weighted_score_by_hand() -> None:
    # (1.0 * 2 + 0.5 * 1 + 0.0 * 1) / 4
    assert weighted_score([1.0, 0.5, 0.0], [2.0, 1.0, 1.0]) == pytest.approx(0.625)
    assert math.isnan(weighted_score([], []))
    with pytest.raises(ValueError, match="3 scores but 2 weights"):
        weighted_score([1.0, 0.5, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="weights must be > 0"):
        weighted_score([1.0], [0.0])


# Cyrillic and Latin letters whose case mapping round-trips, digits, spaces and a little punctuation.
LETTERS = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяabcdefghijklmnopqrstuvwxyz0123456789?.!"
words = st.text(alphabet=LETTERS, min_size=1, max_size=6)
phrases = st.lists(words, min_size=1, max_size=3).map(" ".join)
answers = st.lists(words, min_size=0, max_size=12)
whitespace = st.sampled_from([" ", "  ", "\n", "\t ", "\u00a0"])


@given(
    include=st.lists(phrases, max_size=3),
    groups=st.lists(st.lists(phrases, min_size=1, max_size=3), max_size=2),
    forbidden=st.lists(phrases, max_size=3),
    require_citation=st.booleans(),
    answer_words=answers,
    gaps=st.lists(whitespace, min_size=12, max_size=12),
    cite=st.booleans(),
)
def test_rule_score_bounds_and_invariance_to_case_and_whitespace(
    include, groups, forbidden, require_citation, answer_words, gaps, cite
) -> None:
    question = q(
        must_include=tuple(include),
        must_include_any=tuple(tuple(g) for g in groups),
        must_not_include=tuple(forbidden),
        require_citation=require_citation,
    )
    answer = " ".join(answer_words) + (" (стр. 7)" if cite else "")
    score = score_rules(question, answer)
    assert 0.0 <= score.include_rate <= 1.0
    assert score.safe_ok in (0.0, 1.0)
    assert 0.0 <= score.question_score <= 1.0
    assert score.question_score == pytest.approx(max(0.0, score.base_score - score.citation_penalty))

    respaced = "".join(w + g for w, g in zip(answer_words, gaps)) + (" (стр.  7)" if cite else "")
    for variant in (answer.upper(), answer.title(), respaced, "  " + answer + "\n"):
        other = score_rules(question, variant)
        assert (other.include_rate, other.safe_ok, other.question_score) == (
            score.include_rate,
            score.safe_ok,
            score.question_score,
        )


def test_fold() -> None:
    assert fold("  Ёлка\u00a0и\tЁЖ  ") == "елка и еж"
    assert fold("ﬁ Ｗ") == "fi w"


def test_a_refusal_gets_the_seed_formula_and_its_own_question_punishes_it() -> None:
    # Only must_not_include ["не знаю"] and a required citation: no groups, so include_rate 1.0; "не знаю" said, so
    # safe_ok 0.0; no citation, so 0.7 * 1.0 + 0.3 * 0.0 - 0.2 = 0.5.
    punishes = q(must_not_include=("не знаю",), require_citation=True)
    score = score_rules(punishes, "Не знаю.")
    assert (score.include_total, score.include_rate, score.safe_ok, score.forbidden) == (0, 1.0, 0.0, ("не знаю",))
    assert (score.citation_ok, score.citation_penalty) == (False, 0.2)
    assert score.base_score == pytest.approx(0.7) and score.question_score == pytest.approx(0.5)
    # A question that does not forbid it scores the refusal as any other text: must_include ["2023"] absent (0 of
    # 1), must_not_include ["XX"] absent: 0.7 * 0 + 0.3 * 1 = 0.3, no citation required.
    assert score_rules(q(must_include=("2023",), must_not_include=("XX",)), "Не знаю.").question_score == \
        pytest.approx(0.3)
    # A refusal that holds a required phrase and a citation earns both: "2023" present, the OR-group absent
    # (1 of 2), nothing forbidden, cited: 0.7 * 0.5 + 0.3 * 1 = 0.65.
    cited = q(must_include=("2023",), must_include_any=(("млрд", "миллиард"),), require_citation=True)
    score = score_rules(cited, "Про 2023 год не знаю (стр. 4)")
    assert (score.include_hits, score.include_total, score.missing) == (1, 2, ("млрд | миллиард",))
    assert (score.citation_ok, score.citation_penalty) == (True, 0.0)
    assert score.question_score == pytest.approx(0.65)


@pytest.mark.parametrize("answer", ["", " \n\t", "\u00a0"])
@pytest.mark.parametrize("negative", [False, True])
def test_an_empty_answer_scores_zero_whatever_the_question_expects(answer: str, negative: bool) -> None:
    # Read literally, must_not_include alone gives "nothing said" 0.7 * 1 (no groups) + 0.3 * 1 = 1.0; a question
    # that expects abstention does not change that: its abstention metrics say whether silence was right.
    only_forbidden = q(must_not_include=("XX",), type="negative" if negative else None)
    score = score_rules(only_forbidden, answer)
    assert (score.include_rate, score.safe_ok, score.base_score, score.question_score) == (0.0, 0.0, 0.0, 0.0)
    assert (score.citation_ok, score.citation_penalty) == (False, 0.0)
    required = q(must_include=("2023",), must_include_any=(("млрд", "миллиард"),), require_citation=True,
                 type="negative" if negative else None)
    score = score_rules(required, answer)
    assert (score.include_hits, score.include_total, score.missing) == (0, 2, ("2023", "млрд | миллиард"))
    assert (score.citation_penalty, score.question_score) == (0.2, 0.0)


def test_an_answer_to_a_question_that_expects_abstention_is_scored_as_written() -> None:
    negative = q(type="negative", must_include=("2023",), must_not_include=("XX",), require_citation=True)
    # "XX" said, "2023" not, no citation: 0.7 * 0 + 0.3 * 0 - 0.2, clamped at 0
    assert score_rules(negative, "Выручка XX").question_score == 0.0
    # A refusal: "2023" absent, nothing forbidden, no citation: 0.7 * 0 + 0.3 * 1 - 0.2 = 0.1
    assert score_rules(negative, "Не знаю.").question_score == pytest.approx(0.1)
