"""Seed 004's text metrics by hand in Russian, Chinese and English; the semantic similarity with the packaged
embedding model; invariance to case and whitespace; ROUGE-L's LCS against a plain dynamic programme."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.metrics.answers import score_answers
from rag_eval_assets.metrics.normalise import strip_symbols
from rag_eval_assets.metrics.text import exact_match, rouge_l, semantic_similarity, text_metrics, token_f1, tokens
from rag_eval_assets.retrieval.encoders import SentenceTransformerEncoder


def test_normalisation_and_tokens() -> None:
    assert strip_symbols("  Выручка — 5 млрд. руб.!  ") == "выручка 5 млрд руб"
    assert strip_symbols("Ёмкость: 3.5%") == "емкость 3 5"
    assert tokens("数据库，每天备份 GPU加速。") == ["数", "据", "库", "每", "天", "备", "份", "gpu", "加", "速"]
    assert tokens("!!! ...") == []


def test_russian_by_hand() -> None:
    pred = "Выручка составила 5 млрд руб."
    ref = "Выручка за год составила 5 млрд рублей"
    # pred: выручка составила 5 млрд руб (5); ref: выручка за год составила 5 млрд рублей (7); overlap 4
    # F1 = 2 * 4/5 * 4/7 / (4/5 + 4/7) = 8/12; the LCS is the same 4 tokens in order
    assert token_f1(pred, ref) == pytest.approx(8 / 12)
    assert rouge_l(pred, ref) == pytest.approx(8 / 12)
    assert exact_match(pred, ref) == 0.0
    assert exact_match("Ёлка, зелёная!", "ёлка зеленая") == 1.0


def test_chinese_by_hand() -> None:
    # 数据库每天备份 (7 characters) vs 数据库每周备份一次 (9): 6 shared characters, in order
    assert token_f1("数据库每天备份", "数据库每周备份一次") == pytest.approx(12 / 16)
    assert rouge_l("数据库每天备份", "数据库每周备份一次") == pytest.approx(12 / 16)
    assert exact_match("数据库 备份。", "数据库备份") == 1.0


def test_english_by_hand() -> None:
    assert exact_match("The Cat!", "the cat") == 1.0
    # multiset overlap: one "the" -> P = 1/3, R = 1/2, F1 = 0.4
    assert token_f1("the the the", "the cat") == pytest.approx(0.4)
    # same bag of words, different order: F1 1, LCS 2 of 3
    assert token_f1("b a c", "a b c") == 1.0
    assert rouge_l("b a c", "a b c") == pytest.approx(2 / 3)


def test_empty_texts() -> None:
    for metric in (token_f1, rouge_l, exact_match):
        assert metric("", "") == 1.0
        assert metric("!!!", " ") == 1.0
        assert metric("", "ответ") == 0.0
        assert metric("ответ", "") == 0.0


def test_text_metrics_table_without_encoder() -> None:
    table = text_metrics(["b a c", "数据库每天备份"], ["a b c", "数据库每周备份一次"])
    assert list(table.columns) == ["token_f1", "exact_match", "rouge_l"]
    assert table.to_numpy() == pytest.approx(np.array([[1.0, 0.0, 2 / 3], [0.75, 0.0, 0.75]]))
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        text_metrics(["a", "b"], ["a"])


@pytest.fixture(scope="module")
def encoder() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder()


def test_semantic_similarity_with_the_packaged_model(encoder: SentenceTransformerEncoder) -> None:
    preds = ["The cat sits on the mat.", "The cat sits on the mat.", "", "", "Stock prices fell sharply."]
    refs = ["the cat sits on the mat", "A cat is sitting on a rug.", "", "something", "A cat is sitting on a rug."]
    sims = semantic_similarity(preds, refs, encoder)
    assert sims[0] == pytest.approx(1.0, abs=1e-5)  # equal once normalised
    assert sims[2] == 1.0 and sims[3] == 0.0  # empty texts are not encoded
    assert sims[1] > 0.5 > sims[4]  # a paraphrase is closer than an unrelated sentence
    table = text_metrics(preds, refs, encoder)
    assert table["semantic_similarity"].to_numpy() == pytest.approx(sims)


def test_both_texts_are_encoded_as_passages() -> None:
    prefixed = SentenceTransformerEncoder(prefixes=("query: ", "passage: "))
    pred, ref = "Выручка выросла на 5%.", "Выручка увеличилась на пять процентов"
    [sim] = semantic_similarity([pred], [ref], prefixed)
    as_passage = prefixed.encode([strip_symbols(pred), strip_symbols(ref)], "passage")
    as_query = prefixed.encode([strip_symbols(pred), strip_symbols(ref)], "query")
    assert sim == pytest.approx(float(as_passage[0] @ as_passage[1]), abs=1e-6)
    assert sim != pytest.approx(float(as_query[0] @ as_query[1]), abs=1e-6)


def lcs_dp(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


WORDS = ["выручка", "Год", "2023", "数据", "库", "cat", "The", "млрд."]
texts = st.lists(st.sampled_from(WORDS), max_size=12)
gaps = st.lists(st.sampled_from([" ", "  ", "\n", "\t", " , "]), min_size=12, max_size=12)


@given(pred=texts, ref=texts, pred_gaps=gaps, ref_gaps=gaps)
def test_invariance_bounds_and_lcs(pred: list[str], ref: list[str], pred_gaps: list[str], ref_gaps: list[str]) -> None:
    p, r = " ".join(pred), " ".join(ref)
    f1, em, rl = token_f1(p, r), exact_match(p, r), rouge_l(p, r)
    assert 0.0 <= rl <= f1 + 1e-12 <= 1.0 + 1e-12  # an LCS is never longer than the bag overlap
    assert em in (0.0, 1.0)
    assert token_f1(r, p) == pytest.approx(f1)
    p2 = "".join(w + g for w, g in zip(pred, pred_gaps)).upper()
    r2 = "  " + "".join(w + g for w, g in zip(ref, ref_gaps)).lower()
    assert (token_f1(p2, r2), exact_match(p2, r2), rouge_l(p2, r2)) == pytest.approx((f1, em, rl))
    pt, rt = tokens(p), tokens(r)
    if pt and rt:
        lcs = lcs_dp(pt, rt)
        assert rl == pytest.approx(0.0 if lcs == 0 else 2 * lcs / (len(pt) + len(rt)))


def test_an_empty_or_abstained_answer_matches_no_reference_unless_abstention_is_expected(
    encoder: SentenceTransformerEncoder,
) -> None:
    questions = [
        # seed 004: the reference is the answer
        Question(id="g1", question="Сколько хранятся копии?", format="seed004", reference_answer="Не знаю."),
        Question(id="g2", question="Сколько хранятся копии?", format="seed004", reference_answer="Тридцать дней."),
        # seed 001: a negative's reference answer says the documents do not tell
        Question(id="n1", question="Какой размер обуви у директора?", format="seed001", type="negative",
                 reference_answer="В документах этого нет."),
    ]
    answers = [
        # The refusal equals g1's reference token for token (literally 1.0 on all four), but it abstained.
        {"id": "g1", "answer": "Не знаю.", "abstained": True},
        {"id": "g2", "answer": "   "},
        {"id": "n1", "answer": "Не знаю."},  # inferred abstention: the right answer to a negative
    ]
    per_question, _ = score_answers(questions, answers, encoder)
    value = {(r.query_id, r.metric): r.value for r in per_question.itertuples()}
    metrics = ("token_f1", "exact_match", "rouge_l", "semantic_similarity")
    assert [value[("g1", m)] for m in metrics] == [0.0, 0.0, 0.0, 0.0]
    assert [value[("g2", m)] for m in metrics] == [0.0, 0.0, 0.0, 0.0]
    assert [value[("n1", m)] for m in metrics] == [1.0, 1.0, 1.0, 1.0]
    # Answered text is scored as written: "Тридцать дней." against itself.
    per_question, _ = score_answers(questions[1:2], [{"id": "g2", "answer": "Тридцать дней."}], encoder)
    assert per_question.set_index("metric")["value"][list(metrics)].tolist() == pytest.approx([1.0] * 4, abs=1e-5)
