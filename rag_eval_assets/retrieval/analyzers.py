"""Text analyzers for lexical retrieval: text -> list of index terms.

Every analyzer lowercases and splits on Unicode word boundaries (a word is a run of `\\w` characters, with inner
apostrophes kept so "don't" stays one word, like Lucene's StandardTokenizer; "’" counts as "'"). Then, per language:

- "en": English possessive "'s" dropped, Lucene EnglishAnalyzer stopwords removed, Porter stemmer.
- "ru": "ё" folded to "е", Snowball Russian stopwords removed, Snowball Russian stemmer.
- "zh": runs of CJK characters become overlapping character bigrams ("信息检索" -> 信息 息检 检索; a lone CJK
  character stays a unigram, as in Lucene's CJKBigramFilter); other words as "en" without stemming.
- "multi" (alias "auto"): per word, by script: Cyrillic -> "ru", CJK -> bigrams, anything else -> "en". For mixed
  corpora (a Russian contract quoting English terms, Chinese text with English identifiers).

An analyzer's `name` identifies its exact behaviour and goes into the index version tuple: change the behaviour,
bump the name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Protocol

import Stemmer

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, the list Anserini's BM25 baselines use.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with".split()
)

# Snowball's Russian stop list (the one Lucene's RussianAnalyzer uses), with ё already folded to е.
RUSSIAN_STOPWORDS = frozenset(
    "и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот от меня "
    "еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас нибудь опять уж вам ведь там "
    "потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб без будто чего раз тоже "
    "себе под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один почти мой тем чтобы нее "
    "сейчас были куда зачем всех никогда можно при наконец два об другой хоть после над больше тот через эти нас "
    "про всего них какая много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой "
    "им более всегда конечно всю между".split()
)

# Han ideographs (with extensions and compatibility forms), kana and Hangul: the scripts CJKBigramFilter bigrams.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff"
_CJK_RE = re.compile(f"[{_CJK}]")
_CYRILLIC_RE = re.compile("[\u0400-\u04ff]")
# A CJK run, or a word of other word characters with inner apostrophes.
_WORD_RE = re.compile(f"[{_CJK}]+|[^\\W{_CJK}]+(?:'[^\\W{_CJK}]+)*")
_POSSESSIVE_RE = re.compile("'s$")
# Distinct words whose terms an analyzer keeps (least recently used dropped first): a few MiB.
WORD_CACHE = 2**16


class Analyzer(Protocol):
    name: str

    def __call__(self, text: str) -> list[str]: ...


def _words(text: str) -> list[str]:
    # The typographic apostrophe folds to the ASCII one so "don’t" and "don't" index as one term.
    return _WORD_RE.findall(text.lower().replace("\u2019", "'"))


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@dataclass
class _WordRule:
    """Stopword removal then optional Snowball stemming of one already-lowercased word."""

    stopwords: frozenset[str]
    stemmer_name: str | None
    fold_yo: bool = False
    strip_possessive: bool = False
    _stemmer: Stemmer.Stemmer | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if self.stemmer_name is not None:
            self._stemmer = Stemmer.Stemmer(self.stemmer_name)

    def apply(self, word: str) -> str | None:
        if self.fold_yo:
            word = word.replace("ё", "е")
        if self.strip_possessive:
            word = _POSSESSIVE_RE.sub("", word)
        if word in self.stopwords:
            return None
        return self._stemmer.stemWord(word) if self._stemmer is not None else word


def _english(stem: bool) -> _WordRule:
    return _WordRule(ENGLISH_STOPWORDS, "porter" if stem else None, strip_possessive=True)


def _russian() -> _WordRule:
    return _WordRule(RUSSIAN_STOPWORDS, "russian", fold_yo=True)


@dataclass
class ScriptAnalyzer:
    """Splits into words, then sends each word to the rule for its script (CJK runs become bigrams when asked)."""

    name: str
    other: _WordRule
    cyrillic: _WordRule
    cjk_bigrams: bool
    _terms_of: Callable[[str], tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A word's terms depend on the word alone, and texts repeat words (Zipf): each distinct recent word is
        # analysed once; the stop list, the script tests and the stemmer are not run again for it.
        self._terms_of = lru_cache(maxsize=WORD_CACHE)(self._word_terms)

    def _word_terms(self, word: str) -> tuple[str, ...]:
        if self.cjk_bigrams and _CJK_RE.match(word):
            return tuple(_bigrams(word))
        rule = self.cyrillic if _CYRILLIC_RE.search(word) else self.other
        term = rule.apply(word)
        return (term,) if term else ()

    def __call__(self, text: str) -> list[str]:
        return list(chain.from_iterable(map(self._terms_of, _words(text))))


def _make(language: str) -> ScriptAnalyzer:
    # Fresh rules per analyzer: a PyStemmer object must not be shared between threads.
    if language == "en":
        english = _english(stem=True)
        return ScriptAnalyzer("en-porter-stop-v1", other=english, cyrillic=english, cjk_bigrams=False)
    if language == "ru":
        russian = _russian()
        return ScriptAnalyzer("ru-snowball-stop-v1", other=russian, cyrillic=russian, cjk_bigrams=False)
    if language == "zh":
        english = _english(stem=False)
        return ScriptAnalyzer("zh-cjk-bigram-v1", other=english, cyrillic=english, cjk_bigrams=True)
    return ScriptAnalyzer("multi-script-v1", other=_english(stem=True), cyrillic=_russian(), cjk_bigrams=True)


LANGUAGES = ("en", "ru", "zh", "multi", "auto")


def get_analyzer(language: str) -> Analyzer:
    """The analyzer for a corpus language: one of LANGUAGES ("auto" is the same analyzer as "multi")."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown analyzer language {language!r}; valid: {', '.join(LANGUAGES)}")
    return _make(language)
