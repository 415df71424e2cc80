"""A question's labels as the labeler sees them (which shown chunks are gold) and as the file holds them.

Seed 002 files get anchor gold_supports; seed 001 files get gold_chunk_ids / gold_doc_ids. Existing gold is kept
unless every shown chunk it matches was unmarked; each marked chunk that no remaining label covers gets a new one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import Any

from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.corpus.headings import normalise_heading_path
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.labeling.candidates import Candidate, candidates_frame
from rag_eval_assets.labeling.snippets import choose_snippets

WRITABLE_FORMATS = ("seed002", "seed001")


def is_labeled(q: Question) -> bool:
    """Whether a person already decided: gold of any kind, or marked unanswerable."""
    return q.is_negative or bool(q.gold_supports or q.gold_chunk_ids or q.gold_doc_ids or q.source_map or q.qrels)


def gold_on_screen(q: Question, candidates: list[Candidate]) -> set[str]:
    """The shown chunks the question's current gold resolves to."""
    if q.is_negative or not candidates:
        return set()
    gold = resolve_gold([q], candidates_frame(candidates), strict=False)
    return set(gold["chunk_id"])


def support_for(candidate: Candidate, neighbours: Sequence[str] = ()) -> dict[str, Any]:
    """The anchor of one chunk: its file, its normalised heading path and snippets that occur once in it and in
    none of `neighbours` (the document's other chunks) where possible."""
    return {
        "rel_path": candidate.rel_path,
        "heading_path": normalise_heading_path(candidate.heading_path),
        "snippets": list(choose_snippets(candidate.text, neighbours)),
    }


def updated_record(
    record: dict[str, Any], q: Question, candidates: list[Candidate], selected: Collection[str], answerable: bool,
    neighbours: Callable[[Candidate], Sequence[str]] = lambda candidate: (),
) -> dict[str, Any]:
    """`record` (the file's JSON object, key order kept) with the labeler's decision on `q` written in.

    `neighbours(chunk)`: texts of the chunk's document that its snippets should not occur in (see support_for);
    the other shown chunks of the same file are always among them.
    """
    record = dict(record)
    shown = {c.chunk_id for c in candidates}
    unmarked = shown - set(selected)
    marked = [c for c in candidates if c.chunk_id in selected]
    if q.format == "seed002":
        record["answerable"] = answerable
        def avoid(candidate: Candidate) -> list[str]:
            shown = [c.text for c in candidates if c.rel_path == candidate.rel_path and c.chunk_id != candidate.chunk_id]
            return [*shown, *neighbours(candidate)]

        _write_supports(record, q, candidates, unmarked, marked, answerable, avoid)
    elif q.format == "seed001":
        _write_ids(record, q, candidates, unmarked, marked, answerable)
    else:
        raise ValueError(f"the labeler writes {' and '.join(WRITABLE_FORMATS)} files, not {q.format}")
    return record


def _write_supports(record: dict[str, Any], q: Question, candidates: list[Candidate], unmarked: set[str],
                    marked: list[Candidate], answerable: bool, avoid: Callable[[Candidate], list[str]]) -> None:
    raw = list(record.get("gold_supports") or [])
    if not answerable:
        if "gold_supports" in record:
            record["gold_supports"] = []
        if record.get("required_support_groups") is not None:
            record["required_support_groups"] = None
        return
    frame = candidates_frame(candidates)
    hits: list[set[str]] = []
    for support in q.gold_supports:
        alone = dataclasses.replace(q, gold_supports=(support,), gold_chunk_ids=(), gold_doc_ids=(), source_map=())
        hits.append(set(resolve_gold([alone], frame, strict=False)["chunk_id"]))
    # A support goes only when the person unmarked every shown chunk it matches; one matching nothing shown
    # (its chunk ranked below k) says nothing about it and stays.
    kept = [i for i, matched in enumerate(hits) if not (matched and matched <= unmarked)]
    supports = [dict(raw[i]) for i in kept]
    covered = set().union(*(hits[i] for i in kept)) if kept else set()
    # A marked chunk some kept support already matches adds nothing: that is what keeps supports unduplicated.
    supports.extend(support_for(c, avoid(c)) for c in marked if c.chunk_id not in covered)
    record["gold_supports"] = supports
    groups = record.get("required_support_groups")
    if groups is not None and len(kept) < len(raw):
        renumber = {old: new for new, old in enumerate(kept)}
        remaining = [[renumber[i] for i in group if i in renumber] for group in groups]
        record["required_support_groups"] = [g for g in remaining if g] or None


def _write_ids(record: dict[str, Any], q: Question, candidates: list[Candidate], unmarked: set[str],
               marked: list[Candidate], answerable: bool) -> None:
    if not answerable:
        record["type"] = "negative"
        record["gold_doc_ids"], record["gold_chunk_ids"] = [], []
        return
    if q.type == "negative":
        record["type"] = "fact"  # seed 001 has no plain "answerable": a question with gold is a fact question
    chunk_ids = [c for c in record.get("gold_chunk_ids") or [] if c not in unmarked]
    shown_by_doc: dict[str, set[str]] = {}
    for c in candidates:
        shown_by_doc.setdefault(c.doc_id, set()).add(c.chunk_id)
    doc_ids = [d for d in record.get("gold_doc_ids") or [] if not (d in shown_by_doc and shown_by_doc[d] <= unmarked)]
    for candidate in marked:
        if candidate.chunk_id not in chunk_ids:
            chunk_ids.append(candidate.chunk_id)
        if candidate.doc_id not in doc_ids:
            doc_ids.append(candidate.doc_id)
    record["gold_doc_ids"], record["gold_chunk_ids"] = doc_ids, chunk_ids
