"""The versioned prompts of query generation, the LLM answerer and the two judges, with their reply schemas.

Prompts are short on purpose: they must work on small local models. Changing a prompt's text changes its sha256
(recorded with every result); a deliberate change also bumps its version, which is what runs compare on.
Scores are an enum of 0-5 rather than a range so llama.cpp's schema-to-grammar turns them into six literals.
"""

from __future__ import annotations

from typing import Any

from rag_eval_assets.llm.prompts import Prompt

_JSON_ONLY = "Reply with one JSON object only."

_QUERY_SYSTEM = "You write test questions for a search system from a passage of a document. " + _JSON_ONLY
_QUERY_REPLY = (
    'Write the question and its answer in the language of the passage. JSON: {{"question": "...", "answer": "..."}}'
)
_QUERY_TASKS = {
    "literal": "Write one question that the passage answers directly, using the passage's own words.",
    "paraphrase": (
        "Write one question that the passage answers, phrased in your own words: do not copy phrases from the "
        "passage."
    ),
    "scenario": (
        "Write one question a person in a realistic situation would ask, whose answer is in the passage. Describe "
        "the situation briefly, in your own words."
    ),
}
QUERY_PROMPTS: dict[str, Prompt] = {
    qtype: Prompt(
        name=f"query-{qtype}",
        version="v1",
        system=_QUERY_SYSTEM,
        user_template=f"{task}\n\nPassage:\n{{text}}\n\n{_QUERY_REPLY}",
    )
    for qtype, task in _QUERY_TASKS.items()
}
QUERY_SCHEMA: dict[str, Any] = {
    "title": "generated_query",
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1},
        "answer": {"type": "string", "minLength": 1},
    },
    "required": ["question", "answer"],
    "additionalProperties": False,
}

ANSWER_PROMPT = Prompt(
    name="answer",
    version="v1",
    system=(
        "Answer the question using only the numbered context passages. Put the numbers of the passages you used "
        "in citations and name their sources in the answer as shown in brackets, e.g. (стр. 3). If the passages do "
        "not contain the answer, set abstained to true, leave answer empty and say why in abstain_reason. "
        + _JSON_ONLY
    ),
    user_template=(
        "Context:\n{contexts}\n\nQuestion: {question}\n\n"
        'JSON: {{"answer": "...", "citations": [1], "abstained": false, "abstain_reason": ""}}'
    ),
)
ANSWER_SCHEMA: dict[str, Any] = {
    "title": "answer",
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "citations": {"type": "array", "items": {"type": "integer"}},
        "abstained": {"type": "boolean"},
        "abstain_reason": {"type": "string"},
    },
    "required": ["answer", "citations", "abstained", "abstain_reason"],
    "additionalProperties": False,
}

# The judges' scale; the prompts' texts spell it ("Score 0-5") because a prompt's text is its version.
JUDGE_TOP_SCORE = 5
_SCORE = {"type": "integer", "enum": list(range(JUDGE_TOP_SCORE + 1))}
_CLAIMS = {"type": "array", "items": {"type": "string"}}

GROUNDEDNESS_PROMPT = Prompt(
    name="judge-groundedness",
    version="v1",
    system=(
        "You check whether an answer is supported by context passages. List the answer's claims the passages "
        "support and those they do not. Score 0-5: 5 = every claim supported and its source cited, 0 = no claim "
        "supported. " + _JSON_ONLY
    ),
    user_template=(
        "Context:\n{contexts}\n\nQuestion: {question}\n\nAnswer:\n{answer}\n\n"
        'JSON: {{"supported_claims": ["..."], "unsupported_claims": ["..."], "score": 0}}'
    ),
)
GROUNDEDNESS_SCHEMA: dict[str, Any] = {
    "title": "groundedness",
    "type": "object",
    "properties": {"supported_claims": _CLAIMS, "unsupported_claims": _CLAIMS, "score": _SCORE},
    "required": ["supported_claims", "unsupported_claims", "score"],
    "additionalProperties": False,
}

CORRECTNESS_PROMPT = Prompt(
    name="judge-correctness",
    version="v1",
    system=(
        "You grade whether an answer correctly answers the question, using the context and the reference answer "
        "when one is given. Score 0-5: 5 = correct and complete, 0 = wrong or no answer. Explain briefly. "
        + _JSON_ONLY
    ),
    user_template=(
        "Question: {question}\n\nReference answer: {reference}\n\nContext:\n{contexts}\n\nAnswer:\n{answer}\n\n"
        'JSON: {{"reasoning": "...", "score": 0}}'
    ),
)
CORRECTNESS_SCHEMA: dict[str, Any] = {
    "title": "correctness",
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "score": _SCORE},
    "required": ["reasoning", "score"],
    "additionalProperties": False,
}

# judge prompt version -> judge name -> (prompt, reply schema). A new judge prompt is a new version here, so runs
# judged with different prompts never compare silently.
JUDGE_PROMPTS: dict[str, dict[str, tuple[Prompt, dict[str, Any]]]] = {
    "v1": {
        "groundedness": (GROUNDEDNESS_PROMPT, GROUNDEDNESS_SCHEMA),
        "correctness": (CORRECTNESS_PROMPT, CORRECTNESS_SCHEMA),
    },
}


def prompt_version(prompt: Prompt) -> str:
    """The version string sent with a call (and part of its cache key): name@version."""
    return f"{prompt.name}@{prompt.version}"
