"""Seed 004 query generation: chunk sampling, near-duplicates, copy flags, anchors and the evalset round trip.

The LLM is a scripted OpenAI-compatible server on loopback whose replies are computed from the prompt it gets.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pandas as pd
import pytest

from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.evalset.freeze import evalset_sha256
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.schema import GoldSupport, SourceRef
from rag_eval_assets.generation.near_duplicates import longest_copied_span, near_duplicates
from rag_eval_assets.generation.prompts import QUERY_PROMPTS
from rag_eval_assets.generation.query_generation import (
    answer_snippet,
    generate_queries,
    sample_chunks,
    write_generated_evalset,
)
from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm import LLMClient, LLMSettings
from rag_eval_assets_tests.llm_fault_server import Reply, llm_fault_server


def _chunks(rows: list[tuple[str, str, str, int | None, str]]) -> pd.DataFrame:
    """(chunk_id, rel_path, heading_path, page, text) -> a chunks table."""
    return pd.DataFrame(
        {
            "chunk_id": [r[0] for r in rows],
            "doc_id": [r[1] for r in rows],
            "corpus_id": ["t"] * len(rows),
            "rel_path": [r[1] for r in rows],
            "heading_path": [r[2] for r in rows],
            "page": pd.array([r[3] for r in rows], dtype="Int64"),
            "chunk_index": list(range(len(rows))),
            "text": [r[4] for r in rows],
            "char_start": [0] * len(rows),
            "char_end": [len(r[4]) for r in rows],
            "n_tokens": [10] * len(rows),
        }
    )


LONG = " This sentence pads the chunk past the minimum length for sampling."
MANY = _chunks(
    [(f"{doc}-{i}", f"{doc}.md", "H", None, f"Chunk {i} of {doc}." + LONG) for doc in "abc" for i in range(4)]
    + [("d-0", "d.md", "H", None, "Too short.")]
)


def test_sample_chunks_visits_every_document_before_any_second_chunk():
    sample = sample_chunks(MANY, 5, seed=1)
    docs = sample["doc_id"].tolist()
    assert len(docs) == 5 and set(docs[:3]) == {"a.md", "b.md", "c.md"}
    assert set(docs[3:]) < {"a.md", "b.md", "c.md"}
    assert list(sample.columns) == list(MANY.columns)
    assert "d-0" not in set(sample["chunk_id"])  # shorter than min_chars


def test_sample_chunks_is_seeded_and_ignores_row_order():
    a = sample_chunks(MANY, 7, seed=3)
    b = sample_chunks(MANY.iloc[::-1].reset_index(drop=True), 7, seed=3)
    assert a.equals(b)
    others = {tuple(sample_chunks(MANY, 7, seed=s)["chunk_id"]) for s in range(6)}
    assert len(others) > 1
    assert len(sample_chunks(MANY, 100, seed=0)) == 12


def test_near_duplicates_keep_the_first_and_name_it():
    texts = [
        "What is the wind limit for the dome?",
        "what is the wind limit for the dome",  # case and punctuation only
        "How often are the rails lubricated?",
        "What is the wind limit of the dome?",
    ]
    kept, dropped = near_duplicates(texts, threshold=0.7)
    assert kept == [0, 2]
    assert [(d.index, d.kept_index) for d in dropped] == [(1, 0), (3, 0)]
    assert dropped[0].similarity == 1.0
    assert dropped[1].similarity == pytest.approx(25 / 34)  # one word of eight changed
    assert near_duplicates(texts, threshold=1.0)[0] == [0, 2, 3]


def test_longest_copied_span_is_normalised():
    span = longest_copied_span("Why must the DOME stay closed, when dust is high?", "the dome stays closed; dust")
    assert span == "the dome stay"


def test_answer_snippet_points_at_the_answer_sentence():
    text = "# Shutter\n\nThe shutter is red. Lubricate the shutter rails every sixty days with KR-7 lithium grease."
    # Whole words up to 48 characters.
    assert answer_snippet(text, "every sixty days") == "Lubricate the shutter rails every sixty days"
    # A short answer is found by containment; unspaced text is cut at 48 characters.
    zh = "协议期限为五年，到二零二八年九月十一日为止，双方每年十一月举行一次联合工作会议，地点在两地之间轮换。"
    assert len(zh) > 48
    assert answer_snippet("云岭大学与天文台合作。" + zh, "五年") == zh[:48]


SOURCE = _chunks(
    [
        ("n1", "notes/Dome.md", "Dome > Shutter", None,
         "## Shutter\n\nLubricate the shutter rails every 60 days with KR-7 grease. "
         "The drive motor was replaced in 2021."),
        ("p2", "docs/report.pdf", "", 2,
         "The observatory budget in 2025 was 61.4 million roubles. Grants gave 38 percent of the budget."),
        ("bad", "notes/Bad.md", "Bad", None, "FAIL this chunk: the scripted model never replies with valid JSON here."),
    ]
)


def _passage(body: dict[str, Any]) -> str:
    return re.search(r"Passage:\n(.*)\n\nWrite the question", body["messages"][-1]["content"], re.S).group(1)


def _responder(body: dict[str, Any]) -> Reply:
    """A deterministic stand-in model: literal and paraphrase questions of a chunk are the same text (so the
    paraphrase is a near-duplicate), the scenario question copies the chunk's first sentence."""
    if "repair" in json.dumps(body) or "does not match the required JSON Schema" in body["messages"][-1]["content"]:
        return Reply("still not json")
    passage = _passage(body)
    if passage.startswith("FAIL"):
        return Reply("not json at all")
    first = passage.split(". ")[0].removeprefix("## Shutter\n\n")
    task = body["messages"][-1]["content"].split("\n")[0]
    if task.startswith("Write one question a person"):
        question = f"I am on shift: {first}?"
    else:
        question = f"What does the text say about {first.split()[1]}?"
    return Reply(json.dumps({"question": question, "answer": first + "."}), prompt_tokens=50, completion_tokens=20)


def _client(base_url: str) -> LLMClient:
    return LLMClient(LLMSettings(base_url=base_url, model="scripted", retry=RetryPolicy(max_attempts=1)))


def test_generate_queries_gold_anchors_duplicates_flags_and_errors():
    with llm_fault_server(responder=_responder) as server, _client(server.base_url) as client:
        questions, report = generate_queries(client, SOURCE, copy_min_chars=40)
    assert [(q.type, q.question) for q in questions] == [
        ("literal", "What does the text say about the?"),
        ("scenario", "I am on shift: Lubricate the shutter rails every 60 days with KR-7 grease?"),
        ("literal", "What does the text say about observatory?"),
        ("scenario", "I am on shift: The observatory budget in 2025 was 61.4 million roubles?"),
    ]
    lit = questions[0]
    assert lit.id.startswith("gen-") and lit.format == "seed004"
    assert lit.gold_chunk_ids == ("n1",)
    assert lit.reference_answer == "Lubricate the shutter rails every 60 days with KR-7 grease."
    snippet = "Lubricate the shutter rails every 60 days with"
    assert lit.gold_supports == (GoldSupport("notes/Dome.md", "Dome > Shutter", (snippet,)),)
    assert lit.source_map == ()
    pdf = questions[2]
    assert pdf.source_map == (SourceRef("docs/report.pdf", 2, ("The observatory budget in 2025 was 61.4 million",)),)
    assert pdf.gold_supports == ()

    assert report["requested"] == 9 and report["generated"] == 4
    # The paraphrase of each good chunk repeats its literal question word for word.
    assert [(d["chunk_id"], d["type"], d["duplicate_of"], d["similarity"]) for d in report["near_duplicates"]] == [
        ("n1", "paraphrase", questions[0].id, 1.0), ("p2", "paraphrase", questions[2].id, 1.0)]
    assert [(f["query_id"], f["copied_chars"]) for f in report["copy_flags"]] == [
        (questions[1].id, len("lubricate the shutter rails every 60 days with kr 7 grease")),
        (questions[3].id, len("the observatory budget in 2025 was 61 4 million roubles")),
    ]
    assert [(e["chunk_id"], e["type"]) for e in report["errors"]] == [
        ("bad", "literal"), ("bad", "paraphrase"), ("bad", "scenario")]
    assert all("after one repair request" in e["error"] for e in report["errors"])
    # Every call is recorded with its tokens and latency; the failed ones made two requests (reply and repair).
    assert len(report["calls"]) == 9 and len(server.requests) == 6 + 3 * 2
    good = [c for c in report["calls"] if c["error"] is None]
    assert {(c["prompt_tokens"], c["completion_tokens"]) for c in good} == {(50, 20)}
    assert all(c["latency_s"] > 0 for c in report["calls"])
    assert report["prompts"]["literal"]["sha256"] == QUERY_PROMPTS["literal"].sha256


def test_generated_evalset_round_trips_through_the_loader_and_resolves_to_its_chunks(tmp_path):
    with llm_fault_server(responder=_responder) as server, _client(server.base_url) as client:
        questions, _ = generate_queries(client, SOURCE)
    path = tmp_path / "generated.jsonl"
    write_generated_evalset(questions, path)
    loaded = load_evalset(path)
    assert [dataclasses.replace(q, source_file="", source_line=None, raw={}) for q in loaded] == questions
    assert [q.source_line for q in loaded] == [1, 2, 3, 4]
    # Written again from what was loaded, the file is byte-identical: the frozen hash is stable.
    again = tmp_path / "again.jsonl"
    write_generated_evalset(loaded, again)
    assert evalset_sha256(again) == evalset_sha256(path)

    gold = resolve_gold(loaded, SOURCE)
    by_source = gold.groupby("query_id")["source"].apply(set).to_dict()
    assert set(gold["chunk_id"]) == {"n1", "p2"}
    assert by_source[loaded[0].id] == {"gold_chunk_ids", "gold_supports"}
    assert by_source[loaded[2].id] == {"gold_chunk_ids", "source_map"}


def test_anchors_survive_rechunking(tmp_path):
    with llm_fault_server(responder=_responder) as server, _client(server.base_url) as client:
        questions, _ = generate_queries(client, SOURCE.iloc[:1], types=("literal",))
    # The same section cut into two chunks with new ids: the chunk id goes stale, the anchor finds the new chunk.
    text = SOURCE["text"][0]
    cut = text.index("The drive")
    rechunked = _chunks([("n1a", "notes/Dome.md", "Dome > Shutter", None, text[:cut]),
                         ("n1b", "notes/Dome.md", "Dome > Shutter", None, text[cut:])])
    gold = resolve_gold(questions, rechunked)
    assert gold["chunk_id"].tolist() == ["n1a"]


def test_unknown_types_are_refused():
    with pytest.raises(ValueError, match="types"):
        generate_queries(None, SOURCE, types=("definition",))  # type: ignore[arg-type]
