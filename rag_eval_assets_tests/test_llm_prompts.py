from __future__ import annotations

import hashlib
import json

import pytest

from rag_eval_assets.llm import Prompt

PROMPT = Prompt(
    name="answer",
    version="1",
    system="Answer only from the context. Reply as JSON like {{\"answer\": \"...\"}}.",
    user_template="Context:\n{context}\n\nQuestion: {question}",
)


def test_sha256_is_over_the_canonical_text_of_all_four_fields():
    canonical = json.dumps(
        {"name": "answer", "version": "1", "system": PROMPT.system, "user_template": PROMPT.user_template},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    )
    assert PROMPT.sha256 == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    changed = [
        Prompt("answer2", "1", PROMPT.system, PROMPT.user_template),
        Prompt("answer", "2", PROMPT.system, PROMPT.user_template),
        Prompt("answer", "1", PROMPT.system + " ", PROMPT.user_template),
        Prompt("answer", "1", PROMPT.system, PROMPT.user_template.replace("Question", "Q")),
    ]
    assert len({PROMPT.sha256, *(p.sha256 for p in changed)}) == 5


def test_render_fills_the_fields_and_keeps_escaped_braces():
    messages = PROMPT.render(context="Paris is in France.", question="Where is Paris?")
    assert messages == [
        {"role": "system", "content": 'Answer only from the context. Reply as JSON like {"answer": "..."}.'},
        {"role": "user", "content": "Context:\nParis is in France.\n\nQuestion: Where is Paris?"},
    ]
    assert PROMPT.fields == {"context", "question"}


def test_an_empty_system_prompt_sends_only_the_user_message():
    assert Prompt("p", "1", "", "Say {word}.").render(word="hi") == [{"role": "user", "content": "Say hi."}]


def test_render_names_every_missing_value():
    with pytest.raises(ValueError, match=r"answer@1 needs values for \['context', 'question'\]"):
        PROMPT.render()


@pytest.mark.parametrize(
    ("template", "match"),
    [("Reply {\"a\": 1}", "plain names"), ("{0} and {1}", "plain names"), ("{q.attr}", "plain names"),
     ("unclosed {q", "malformed"), ("  ", "empty user_template")],
)
def test_bad_templates_fail_when_the_prompt_is_defined(template, match):
    with pytest.raises(ValueError, match=match):
        Prompt("p", "1", "", template)
