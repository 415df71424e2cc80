"""Gold resolution: every kind of label, turned into (query, chunk) rows for the current chunking.

Labels are resolved at run time against whatever chunks exist, so anchored labels (seed 002
gold_supports, seed 003 source_map) survive re-chunking; chunk-id labels only survive while the
chunk text they hashed is unchanged.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag_eval_assets.corpus.headings import heading_prefix_match
from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.schema import GoldSupport, Question, SourceRef

GOLD_COLUMNS = ("query_id", "chunk_id", "doc_id", "grade", "support_index", "source")
SOURCES = ("gold_supports", "source_map", "gold_doc_ids", "gold_chunk_ids", "qrels")


@dataclass(frozen=True)
class UnresolvedGold:
    """One label that resolves to nothing in the corpus: its question, the label as its field names it
    (`gold_supports[0]`, `source_map[1]`, `gold_chunk_ids[2]`, `gold_doc_ids[0]`, `qrels`) and why."""

    query_id: str
    support: str
    why: str
    file: str
    line: int | None

    def problem(self) -> InputProblem:
        return InputProblem(self.file, self.line, self.support, self.why)


@dataclass(frozen=True)
class GoldResolution:
    """The gold rows (GOLD_COLUMNS), counts per source plus `stale_chunk_ids` and `empty_doc_refs`, the labels
    that resolved to nothing, and the questions none of whose labels resolved (`unscored`)."""

    gold: pd.DataFrame
    counts: dict[str, int]
    unresolved: list[UnresolvedGold]

    @property
    def unscored(self) -> list[str]:
        """Questions with unresolved labels and no gold row: the metrics treat them as unlabelled."""
        with_gold = set(self.gold["query_id"])
        return list(dict.fromkeys(u.query_id for u in self.unresolved if u.query_id not in with_gold))

    def unresolved_document(self) -> dict[str, Any]:
        """The unresolved labels as JSON, as gold_labels' metadata and a run's metrics.json keep them."""
        return {"labels": [dataclasses.asdict(u) for u in self.unresolved], "unscored_questions": self.unscored}


def unresolved_count(document: Mapping[str, Any]) -> str:
    """How many labels of how many questions an `unresolved_document` lists, as a sentence."""
    labels = document["labels"]
    questions = len({label["query_id"] for label in labels})
    return (
        f"{_count(len(labels), 'gold label')} of {_count(questions, 'question')} "
        f"{'resolves' if len(labels) == 1 else 'resolve'} to nothing in the corpus."
    )


def unresolved_summary(document: Mapping[str, Any]) -> str:
    """The count, then how the run scores the questions: the words the check and the reports use."""
    unscored = document["unscored_questions"]
    text = unresolved_count(document) + " Each question is scored on the labels that did resolve"
    if unscored:
        text += (
            f"; {_count(len(unscored), 'question')} with no resolved label at all ({', '.join(unscored)}) "
            f"{'is' if len(unscored) == 1 else 'are'} left out of every metric that needs gold (the retrieval "
            "metrics among them), as unlabelled questions are"
        )
    return text + "."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def resolve_gold(
    questions: list[Question],
    chunks: pd.DataFrame,
    corpus_doc_ids: Collection[str] | None = None,
    strict: bool = True,
) -> pd.DataFrame:
    """The gold rows (GOLD_COLUMNS) of `questions` over `chunks`; see `resolve_gold_report`."""
    return resolve_gold_report(questions, chunks, corpus_doc_ids, strict).gold


def resolve_gold_report(
    questions: list[Question],
    chunks: pd.DataFrame,
    corpus_doc_ids: Collection[str] | None = None,
    strict: bool = True,
) -> GoldResolution:
    """Gold rows, counts and the labels that resolved to nothing (see GoldResolution).

    One row per (query, chunk, source, support_index); grade is 1 except for qrels, which carry
    their own grade (only grade > 0). Negative and unanswerable questions get no rows.

    - gold_supports (seed 002): chunks with the exact rel_path whose heading_path has the gold
      heading_path as a component-wise prefix and, when snippets are given, contain at least one
      of them; support_index is the position in gold_supports.
    - source_map (seed 003): chunks of `file` (exact rel_path, else the one rel_path whose base
      name is `file`), on `page` when given, containing at least one anchor (every chunk of that
      file/page when there are no anchors); support_index is the position in source_map.
    - gold_doc_ids (seed 001): every chunk of those documents; support_index -1.
    - gold_chunk_ids (seed 001): those chunks as they are; support_index -1.
    - qrels (BEIR): every chunk of each judged document; support_index -1.

    Snippets and anchors are compared case-insensitively (casefold) with runs of whitespace
    collapsed to one space, so line wrapping in a chunk or a label does not hide a match.

    A label that points at no document, chunk or anchor is unresolved: one UnresolvedGold each,
    naming the question's file, line and field; with `strict` they are raised together as one
    InputError. The exception is what makes labels survive re-chunking: gold_chunk_ids that match
    no chunk are dropped (and counted as stale_chunk_ids), not unresolved, when the same
    question's anchors resolve to at least one chunk.

    `corpus_doc_ids`, every document id of the corpus, tells a document that exists but has no
    chunk (empty text: Cranfield has two, and qrels may judge such documents) from an unknown
    one: gold_doc_ids and qrels naming it give no rows and are counted as empty_doc_refs rather
    than being unresolved. Without it, only documents with chunks are known.

    `strict=False` also serves a partial view of the corpus (the chunks a service under test
    returned): labels that match nothing there are simply unmatched.
    """
    index = _ChunkIndex(chunks)
    known_docs = set(index.by_doc) if corpus_doc_ids is None else set(corpus_doc_ids)
    counts = dict.fromkeys((*SOURCES, "stale_chunk_ids", "empty_doc_refs"), 0)
    rows: list[tuple[str, str, str, int, int, str]] = []
    unresolved: list[UnresolvedGold] = []
    for q in questions:
        if not q.is_negative:
            _resolve_question(q, index, known_docs, rows, unresolved, counts)
    if unresolved and strict:
        raise InputError([u.problem() for u in unresolved])

    gold = pd.DataFrame(rows, columns=list(GOLD_COLUMNS)).drop_duplicates(ignore_index=True)
    dtypes = {"grade": "int64", "support_index": "int64"}
    gold = gold.astype({column: dtypes.get(column, "str") for column in GOLD_COLUMNS})
    for source, n in gold["source"].value_counts().items():
        counts[source] = int(n)
    return GoldResolution(gold, counts, unresolved)


def with_resolved_support_groups(questions: list[Question], gold: pd.DataFrame) -> list[Question]:
    """`questions` whose required_support_groups name only supports with a row in `gold`, so that a support that
    resolved to nothing does not make its group impossible to satisfy: a group left empty goes, and with no group
    left the question falls back to one group of every resolved support."""
    supports = gold[(gold["source"] == "gold_supports") & (gold["support_index"] >= 0)]
    resolved = {q: set(map(int, s)) for q, s in supports.groupby("query_id")["support_index"]}
    out = []
    for q in questions:
        if q.required_support_groups is not None:
            kept = resolved.get(q.id, set())
            narrowed = (tuple(i for i in group if i in kept) for group in q.required_support_groups)
            groups = tuple(g for g in narrowed if g)
            if groups != q.required_support_groups:
                q = dataclasses.replace(q, required_support_groups=groups or None)
        out.append(q)
    return out


def _resolve_question(
    q: Question,
    index: _ChunkIndex,
    known_docs: set[str],
    rows: list[tuple[str, str, str, int, int, str]],
    unresolved: list[UnresolvedGold],
    counts: dict[str, int],
) -> None:
    """Append q's gold rows to `rows`, its unresolved labels to `unresolved`, its stale/empty counts to `counts`."""

    def add(positions: list[int], source: str, support_index: int = -1, grade: int = 1) -> None:
        rows.extend((q.id, index.chunk_ids[p], index.doc_ids[p], grade, support_index, source) for p in positions)

    def problem(field: str, message: str) -> None:
        unresolved.append(UnresolvedGold(q.id, field, message, q.source_file, q.source_line))

    def unknown(doc_ids: list[str]) -> list[str]:
        """The doc ids without chunks that are not known (empty) documents; the known are counted."""
        without_chunks = [d for d in doc_ids if d not in index.by_doc]
        counts["empty_doc_refs"] += sum(d in known_docs for d in without_chunks)
        return [d for d in without_chunks if d not in known_docs]

    anchored_rows = 0
    for i, support in enumerate(q.gold_supports):
        positions, message = _resolve_support(index, support)
        if message:
            problem(f"gold_supports[{i}]", message)
        add(positions, "gold_supports", i)
        anchored_rows += len(positions)
    for i, ref in enumerate(q.source_map):
        positions, message = _resolve_source_ref(index, ref)
        if message:
            problem(f"source_map[{i}]", message)
        add(positions, "source_map", i)
        anchored_rows += len(positions)

    doc_ids = list(dict.fromkeys(q.gold_doc_ids))
    for d in unknown(doc_ids):
        problem(f"gold_doc_ids[{q.gold_doc_ids.index(d)}]", f"no document has id {d!r}")
    add([p for d in doc_ids for p in index.by_doc.get(d, ())], "gold_doc_ids")

    chunk_ids = list(dict.fromkeys(q.gold_chunk_ids))
    stale = [c for c in chunk_ids if c not in index.by_chunk_id]
    if stale and anchored_rows:
        counts["stale_chunk_ids"] += len(stale)
    else:
        for c in stale:
            problem(f"gold_chunk_ids[{q.gold_chunk_ids.index(c)}]", f"no chunk has id {c!r}")
    add([index.by_chunk_id[c] for c in chunk_ids if c in index.by_chunk_id], "gold_chunk_ids")

    judged = {d: grade for d, grade in q.qrels.items() if grade > 0}
    for d in unknown(list(judged)):
        problem("qrels", f"no document has id {d!r} (judged with grade {judged[d]})")
    for d, grade in judged.items():
        add(index.by_doc.get(d, []), "qrels", grade=grade)


def normalise_for_match(s: str) -> str:
    """Casefolded, whitespace runs collapsed: the form snippets, anchors and chunk text are compared in."""
    return " ".join(s.casefold().split())


class _ChunkIndex:
    """Look-ups over the chunks table, built once per resolution."""

    def __init__(self, chunks: pd.DataFrame):
        self.chunk_ids: list[str] = chunks["chunk_id"].tolist()
        self.doc_ids: list[str] = chunks["doc_id"].tolist()
        self.rel_paths: list[str] = chunks["rel_path"].tolist()
        self.heading_paths: list[str] = chunks["heading_path"].tolist()
        self.pages: list[int | None] = [None if pd.isna(p) else int(p) for p in chunks["page"].tolist()]
        self._texts: list[str] = chunks["text"].tolist()
        # Offsets are unknown for chunks a service under test returned; they only serve diagnostics.
        self._starts: list[int] | None = chunks["char_start"].tolist() if "char_start" in chunks else None
        self._ends: list[int] | None = chunks["char_end"].tolist() if "char_end" in chunks else None
        self._normalised: dict[int, str] = {}
        self.by_chunk_id = {c: p for p, c in enumerate(self.chunk_ids)}
        self.by_doc: dict[str, list[int]] = defaultdict(list)
        self.by_rel_path: dict[str, list[int]] = defaultdict(list)
        self.rel_paths_by_basename: dict[str, set[str]] = defaultdict(set)
        for p, (doc_id, rel_path) in enumerate(zip(self.doc_ids, self.rel_paths)):
            self.by_doc[doc_id].append(p)
            self.by_rel_path[rel_path].append(p)
            self.rel_paths_by_basename[posixpath.basename(rel_path)].add(rel_path)
        self.by_doc = dict(self.by_doc)
        self.by_rel_path = dict(self.by_rel_path)

    def text(self, position: int) -> str:
        """The chunk's text in `normalise_for_match` form (computed on first use)."""
        if position not in self._normalised:
            self._normalised[position] = normalise_for_match(self._texts[position])
        return self._normalised[position]

    def containing(self, positions: list[int], needles: tuple[str, ...]) -> list[int]:
        """The positions whose text contains at least one needle (all of them when no needles)."""
        wanted = [normalise_for_match(n) for n in needles]
        if not wanted:
            return positions
        return [p for p in positions if any(w in self.text(p) for w in wanted)]

    def straddles(self, positions: list[int], needles: tuple[str, ...]) -> bool:
        """Whether a needle occurs in the text these chunks cover together.

        Asked once no single chunk contains a needle: then it crosses a chunk boundary. The covered
        text is rebuilt from the chunks' offsets, so overlapping text is not repeated.
        """
        if self._starts is None or self._ends is None:
            return False
        pieces = []
        covered_to = -1
        for p in sorted(positions, key=lambda p: self._starts[p]):
            start, end, text = self._starts[p], self._ends[p], self._texts[p]
            if start >= covered_to:
                pieces.append(" " + text)
            elif end > covered_to:
                pieces.append(text[covered_to - start :])
            covered_to = max(covered_to, end)
        covered = normalise_for_match("".join(pieces))
        return any(normalise_for_match(n) in covered for n in needles)


def _resolve_support(index: _ChunkIndex, support: GoldSupport) -> tuple[list[int], str | None]:
    """Chunk positions matching a seed 002 anchor, or [] and why none does."""
    in_file = index.by_rel_path.get(support.rel_path, [])
    if not in_file:
        return [], f"rel_path {support.rel_path!r} names no document with chunks"
    under = [p for p in in_file if heading_prefix_match(index.heading_paths[p], support.heading_path)]
    if not under:
        return [], f"no chunk of {support.rel_path!r} is under heading_path {support.heading_path!r}"
    matched = index.containing(under, support.snippets)
    if not matched:
        return [], _no_text_message(index, under, support.snippets, "snippets", support.rel_path)
    return matched, None


def _resolve_source_ref(index: _ChunkIndex, ref: SourceRef) -> tuple[list[int], str | None]:
    """Chunk positions matching a seed 003 source_map entry, or [] and why none does."""
    if ref.file in index.by_rel_path:
        rel_path = ref.file
    else:
        candidates = sorted(index.rel_paths_by_basename.get(ref.file, ()))
        if not candidates:
            return [], f"file {ref.file!r} names no document with chunks"
        if len(candidates) > 1:
            return [], f"file {ref.file!r} is ambiguous: it is the base name of {candidates}"
        rel_path = candidates[0]
    in_file = index.by_rel_path[rel_path]
    on_page = in_file if ref.page is None else [p for p in in_file if index.pages[p] == ref.page]
    if not on_page:
        return [], f"no chunk of {rel_path!r} is on page {ref.page}"
    matched = index.containing(on_page, ref.anchors)
    if not matched:
        return [], _no_text_message(index, on_page, ref.anchors, "anchors", rel_path)
    return matched, None


def _no_text_message(
    index: _ChunkIndex, positions: list[int], needles: tuple[str, ...], what: str, rel_path: str
) -> str:
    if index.straddles(positions, needles):
        return (
            f"none of the {what} {list(needles)} lies whole inside one chunk of {rel_path!r}: "
            "they cross a chunk boundary (a larger chunk_size_chars or overlap_chars keeps them whole)"
        )
    return f"none of the {what} {list(needles)} occurs in the matching chunks of {rel_path!r}"
