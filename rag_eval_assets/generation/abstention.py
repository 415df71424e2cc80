"""Abstention (seed 002): inferring it when the answerer does not say (metrics/abstention.py scores it).

Inference, used only when an answerer gives no `abstained` flag: an answer that is empty (or whitespace) is an
abstention ("empty_answer"); so is one that contains a phrase of REFUSAL_PHRASES ("refusal_phrase"), compared
casefolded with whitespace runs collapsed and "’" read as "'". The phrases are specific refusals, not bare
negations, because a containment test on a long answer would otherwise fire on ordinary sentences.
"""

from __future__ import annotations

REFUSAL_PHRASES: dict[str, tuple[str, ...]] = {
    "en": (
        "i don't know",
        "i do not know",
        "i cannot answer",
        "i can't answer",
        "unable to answer",
        "cannot be answered",
        "not enough information",
        "insufficient information",
        "no information about",
        "no relevant information",
        "the context does not contain",
        "the context does not provide",
        "the context does not mention",
        "not mentioned in the context",
        "not found in the context",
        "i could not find",
        "i couldn't find",
    ),
    "ru": (
        "не знаю",
        "не могу ответить",
        "невозможно ответить",
        "нет информации",
        "недостаточно информации",
        "нет данных",
        "нет сведений",
        "информация отсутствует",
        "не удалось найти",
        "в контексте нет",
        "в контексте не указано",
        "в документах нет",
    ),
    "zh": (
        "我不知道",
        "无法回答",
        "不能回答",
        "没有相关信息",
        "没有足够的信息",
        "信息不足",
        "未找到",
        "找不到",
        "无法找到",
        "上下文中没有",
        "文档中没有",
    ),
}
_PHRASES = tuple(p for phrases in REFUSAL_PHRASES.values() for p in phrases)

def infer_abstention(answer: str) -> str | None:
    """The abstain reason the answer text implies ("empty_answer", "refusal_phrase"), None when it answers."""
    text = " ".join(answer.casefold().replace("\u2019", "'").split())
    if not text:
        return "empty_answer"
    if any(phrase in text for phrase in _PHRASES):
        return "refusal_phrase"
    return None
