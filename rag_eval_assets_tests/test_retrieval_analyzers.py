from __future__ import annotations

import pytest

from rag_eval_assets.retrieval import analyzers
from rag_eval_assets.retrieval.analyzers import ENGLISH_STOPWORDS, get_analyzer


def test_english_lowercases_drops_stopwords_and_possessives_then_porter_stems():
    analyze = get_analyzer("en")
    assert analyze.name == "en-porter-stop-v1"
    assert analyze("The Runners' shoes are running quickly, John's generalization!") == [
        "runner", "shoe", "run", "quickli", "john", "gener",
    ]


def test_english_keeps_contractions_whole_and_folds_the_typographic_apostrophe():
    assert get_analyzer("en")("don't don’t") == ["don't", "don't"]


def test_english_stopwords_are_lucenes_33():
    assert len(ENGLISH_STOPWORDS) == 33
    assert get_analyzer("en")(" ".join(sorted(ENGLISH_STOPWORDS))) == []


def test_english_tokenisation_is_unicode_aware():
    assert get_analyzer("en")("Café naïve résumé BM25") == ["café", "naïv", "résumé", "bm25"]


def test_russian_folds_yo_drops_stopwords_and_stems():
    analyze = get_analyzer("ru")
    assert analyze("Ёлки и палки: договора купли-продажи ещё не подписаны") == [
        "елк", "палк", "договор", "купл", "продаж", "подписа",
    ]
    assert analyze("ёлка") == analyze("елка")


def test_chinese_makes_overlapping_bigrams_and_a_unigram_for_a_lone_character():
    analyze = get_analyzer("zh")
    assert analyze("信息检索系统") == ["信息", "息检", "检索", "索系", "系统"]
    assert analyze("中") == ["中"]
    # Punctuation ends a run: no bigram crosses "，".
    assert analyze("检索，系统") == ["检索", "系统"]


def test_chinese_analyzer_treats_latin_words_like_english_without_stemming():
    assert get_analyzer("zh")("The running BM25模型") == ["running", "bm25", "模型"]


@pytest.mark.parametrize("language", ["multi", "auto"])
def test_multi_dispatches_each_word_by_script(language):
    analyze = get_analyzer(language)
    assert analyze("Договоры были signed by the runners в 北京 合") == [
        "договор", "sign", "runner", "北京", "合",
    ]


def test_unknown_language_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        get_analyzer("fr")
    assert "'fr'" in str(err.value)
    for valid in ("en", "ru", "zh", "multi", "auto"):
        assert valid in str(err.value)


def test_analyzer_names_differ_per_behaviour():
    names = {get_analyzer(lang).name for lang in ("en", "ru", "zh", "multi")}
    assert len(names) == 4


def test_word_cache_eviction_leaves_the_terms_unchanged(monkeypatch):
    # Each word's terms are cached per analyzer; with room for two words nearly every word is evicted and analysed
    # again, and the terms are those of the test above and of an analyzer that keeps every word.
    text = "Договоры были signed by the runners в 北京 合, runners' договоры signed 北京"
    expected = ["договор", "sign", "runner", "北京", "合", "runner", "договор", "sign", "北京"]
    roomy = get_analyzer("multi")
    monkeypatch.setattr(analyzers, "WORD_CACHE", 2)
    cramped = get_analyzer("multi")
    for _ in range(3):
        assert cramped(text) == roomy(text) == expected
    assert cramped._terms_of.cache_info().currsize == 2
