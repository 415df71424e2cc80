"""The extractive answerer on hand-made chunks: which sentences it picks, how it cites, when it abstains."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rag_eval_assets.configured_run import answerer_part
from rag_eval_assets.defs.answers.build import answerer_for
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_to_frame
from rag_eval_assets.generation.answers import ANSWER_COLUMNS, answer_questions
from rag_eval_assets.generation.citations import Context, contexts_from_json
from rag_eval_assets.generation.extractive import ExtractiveAnswerer, split_sentences
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import write_sample_config

PDF_P2 = Context(
    "c-pdf-2",
    "docs/report.pdf",
    "",
    2,
    "The observatory budget in 2025 was 61.4 million roubles. Grants gave 38 percent of the\nbudget. "
    "Electricity costs rose to 6.8 million roubles.",
)
NOTE = Context(
    "c-note",
    "notes/Dome.md",
    "Dome > Shutter",
    None,
    "## Shutter\n\nLubricate the shutter rails every 60 days. The rack uses KR-7 grease.",
)


def _q(text: str, qid: str = "q1") -> Question:
    return Question(id=qid, question=text, format="seed002")


def test_sentences_split_on_latin_cyrillic_and_chinese_ends_but_not_on_wrapped_lines():
    text = (
        "# Title\n\nFirst sentence here. Second one\nwraps a line! Третье предложение? «Цитата.» Далее\n"
        "- item one\n- item two\n云岭大学与天文台合作。协议期限为五年！到2028年为止？"
    )
    assert split_sentences(text) == [
        "# Title",
        "First sentence here.",
        "Second one wraps a line!",
        "Третье предложение?",
        "«Цитата.»",
        "Далее",
        "- item one",
        "- item two 云岭大学与天文台合作。",
        "协议期限为五年！",
        "到2028年为止？",
    ]


def test_best_sentence_is_chosen_and_cited_with_its_pdf_page():
    answerer = ExtractiveAnswerer(language="en", threshold=0.5, max_sentences=1)
    [answer] = answerer.answer_many([_q("What was the observatory budget in 2025?")], [[NOTE, PDF_P2]], k=2)
    assert answer.answer == "The observatory budget in 2025 was 61.4 million roubles. (стр. 2)"
    assert answer.citations == [
        {"chunk_id": "c-pdf-2", "rel_path": "docs/report.pdf", "heading_path": "", "page": 2, "label": "стр. 2"}
    ]
    assert (answer.abstained, answer.abstained_inferred, answer.abstain_reason, answer.error) == (
        False, False, None, None)
    assert answer.contexts == [NOTE, PDF_P2]
    assert answer.prompt_tokens is None and answer.cost_usd == 0.0


def test_support_is_the_idf_weighted_share_of_question_terms():
    answerer = ExtractiveAnswerer(language="en")
    scored = answerer.score("How often are the shutter rails lubricated?", [NOTE, PDF_P2])
    # Question terms: how, often, shutter, rail, lubric ("are", "the" are stopwords). Candidates: 5 sentences (the
    # heading is skipped). "Lubricate the shutter rails every 60 days." holds shutter, rail, lubric (df 1 each);
    # "how" and "often" are in no sentence.
    idf_df1 = math.log(1 + (5 - 1 + 0.5) / 1.5)
    idf_df0 = math.log(1 + (5 - 0 + 0.5) / 0.5)
    assert scored[0].text == "Lubricate the shutter rails every 60 days."
    assert scored[0].support == pytest.approx(3 * idf_df1 / (3 * idf_df1 + 2 * idf_df0))
    assert [s.support for s in scored[1:]] == [0.0, 0.0, 0.0, 0.0]


def test_several_sentences_come_in_reading_order_with_a_note_label():
    answerer = ExtractiveAnswerer(language="en", threshold=0.2, max_sentences=3)
    [answer] = answerer.answer_many([_q("Which grease is used on the shutter rack and rails?")], [[NOTE]], k=1)
    assert answer.answer == (
        "Lubricate the shutter rails every 60 days. (notes/Dome.md > Dome > Shutter) "
        "The rack uses KR-7 grease. (notes/Dome.md > Dome > Shutter)"
    )
    assert [c["label"] for c in answer.citations] == ["notes/Dome.md > Dome > Shutter"]


def test_abstains_below_the_threshold_and_without_contexts():
    answerer = ExtractiveAnswerer(language="en", threshold=0.3)
    low, empty = answerer.answer_many(
        [_q("What is the boiling point of liquid nitrogen?"), _q("Anything?", "q2")], [[NOTE, PDF_P2], []], k=2
    )
    assert (low.answer, low.abstained, low.abstain_reason, low.citations) == ("", True, "low_support", [])
    assert (empty.answer, empty.abstained, empty.abstain_reason) == ("", True, "no_context")


def test_russian_sentence_is_found_through_the_stemmer():
    ctx = Context(
        "c-ru", "ru/kriostat.md", "Криостат > Заправка", None,
        "Криостат стоит в западном крыле. Дьюар заправляется жидким азотом каждые 36 часов. Работают в очках.",
    )
    answerer = ExtractiveAnswerer(language="ru", threshold=0.5, max_sentences=1)
    [answer] = answerer.answer_many([_q("Как часто заправляют дьюар жидким азотом?")], [[ctx]], k=1)
    assert answer.answer == "Дьюар заправляется жидким азотом каждые 36 часов. (ru/kriostat.md > Криостат > Заправка)"


def test_chinese_sentence_is_found_through_bigrams():
    ctx = Context(
        "c-zh", "zh/partnership.txt", "", None,
        "双方每年十一月举行一次联合工作会议。申请截止日期是每年三月三十一日，录取结果在四月底公布。协议期限为五年。",
    )
    # Question bigrams: 6 of 9 occur in the sentence; 是哪 哪一 一天 occur nowhere and carry the largest idf.
    answerer = ExtractiveAnswerer(language="zh", threshold=0.4, max_sentences=1)
    [answer] = answerer.answer_many([_q("申请截止日期是哪一天？")], [[ctx]], k=1)
    assert answer.answer == "申请截止日期是每年三月三十一日，录取结果在四月底公布。 (zh/partnership.txt)"


def test_a_sentence_repeated_by_overlapping_chunks_counts_once():
    first = Context("a", "n.md", "H", None, "Alpha beta gamma. The shutter rails need grease.")
    second = Context("b", "n.md", "H", None, "The shutter rails need grease. Delta epsilon.")
    answerer = ExtractiveAnswerer(language="en", threshold=0.3)
    [answer] = answerer.answer_many([_q("Do the shutter rails need grease?")], [[first, second]], k=2)
    assert answer.answer == "The shutter rails need grease. (n.md > H)"
    assert [c["chunk_id"] for c in answer.citations] == ["a"]


def _tables():
    chunks = pd.DataFrame(
        {
            "chunk_id": ["c-pdf-2", "c-note"],
            "doc_id": ["docs/report.pdf", "notes/Dome.md"],
            "corpus_id": ["t", "t"],
            "rel_path": ["docs/report.pdf", "notes/Dome.md"],
            "heading_path": ["", "Dome > Shutter"],
            "page": pd.array([2, None], dtype="Int64"),
            "chunk_index": [0, 0],
            "text": [PDF_P2.text, NOTE.text],
            "char_start": [0, 0],
            "char_end": [len(PDF_P2.text), len(NOTE.text)],
            "n_tokens": [20, 15],
        }
    )
    results = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2"],
            "retriever": ["bm25"] * 3,
            "rank": [1, 2, 1],
            "chunk_id": ["c-note", "c-pdf-2", "c-note"],
            "doc_id": ["notes/Dome.md", "docs/report.pdf", "notes/Dome.md"],
            "score": [2.0, 1.0, 0.5],
        }
    )
    questions = questions_to_frame(
        [_q("What was the observatory budget in 2025?"), _q("What is the boiling point of nitrogen?", "q2"),
         _q("Unretrieved question?", "q3")]
    )
    return questions, results, chunks


def test_answer_questions_builds_the_answers_table_deterministically():
    questions, results, chunks = _tables()
    answerer = ExtractiveAnswerer(language="en", threshold=0.5, max_sentences=1)
    first = answer_questions(answerer, questions, results, chunks, k=5)
    second = answer_questions(answerer, questions, results, chunks, k=5)
    assert tuple(first.columns) == ANSWER_COLUMNS
    assert first.drop(columns="latency_s").equals(second.drop(columns="latency_s"))
    assert first["query_id"].tolist() == ["q1", "q2", "q3"]
    assert set(first["retriever"]) == {"bm25"} and set(first["k"]) == {5} and set(first["answerer"]) == {"extractive"}
    assert first["answer"].tolist() == [
        "The observatory budget in 2025 was 61.4 million roubles. (стр. 2)", "", ""]
    assert first["abstain_reason"].tolist()[1:] == ["low_support", "no_context"]
    assert [c.chunk_id for c in contexts_from_json(first["contexts"][0])] == ["c-note", "c-pdf-2"]
    assert json.loads(first["citations"][0])[0]["label"] == "стр. 2"
    assert first["error"].isna().all()


def test_k_limits_the_contexts():
    questions, results, chunks = _tables()
    answers = answer_questions(ExtractiveAnswerer(language="en"), questions, results, chunks, k=1)
    assert [c.chunk_id for c in contexts_from_json(answers["contexts"][0])] == ["c-note"]
    assert answers["abstained"][0]  # the budget sentence is on the rank-2 chunk


def test_retrieval_results_of_two_retrievers_are_refused():
    questions, results, chunks = _tables()
    mixed = pd.concat([results, results.assign(retriever="dense")])
    with pytest.raises(ValueError, match="exactly one retriever"):
        answer_questions(ExtractiveAnswerer(), questions, mixed, chunks, k=5)


def test_the_abstention_threshold_is_a_setting_that_reaches_the_answerer_and_the_version(tmp_path) -> None:
    def settings(extra: str):
        return load_settings(write_sample_config(tmp_path, "retrievers: [bm25]\n" + extra))

    default = settings("")
    assert default.answering.extractive_threshold == 0.3 and answerer_part(default)["threshold"] == 0.3
    chosen = settings("answering: {extractive_threshold: 0.45}\n")
    with answerer_for(chosen, "bm25", None, None) as answerer:
        assert (answerer.kind, answerer.threshold) == ("extractive", 0.45)
    # The version tuple changes with it, so runs with different thresholds say so.
    assert answerer_part(chosen)["threshold"] == 0.45
    for bad in ("0.0", "1.5"):
        with pytest.raises(InputError) as info:
            settings(f"answering: {{extractive_threshold: {bad}}}\n")
        assert [p.field for p in info.value.problems] == ["answering.extractive_threshold"]
