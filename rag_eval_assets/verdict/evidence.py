"""What moved a cell of the comparison: the questions whose gate metric changed, and for the questions that moved it
most, what each run retrieved (gold items marked, with their ranks before and after) and answered.

Built from the per-question rows the comparison already reads (results.jsonl): one index of each run's rows by
(question, retriever, k), then only the cells explained and their top questions are looked at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.gate import is_answer_metric

# A per-question difference smaller than this is no change (values are the same sums in another order at most).
EPSILON = 1e-9
WORSE_FIRST, BETTER_FIRST = "drops first", "gains first"


@dataclass(frozen=True)
class QuestionChange:
    """A question whose gate metric moved in a cell; `flip`: it crossed the metric's success threshold."""

    query_id: str
    question: str | None
    retriever: str
    k: int
    metric: str
    base: float
    cand: float
    flip: bool

    @property
    def diff(self) -> float:
        return self.cand - self.base


@dataclass(frozen=True)
class RetrievedItem:
    rank: int
    chunk_id: str | None
    doc_id: str | None
    where: str | None  # rel_path › heading_path, for a person to find the chunk
    score: float | None
    gold: bool  # relevant to the question at the run's retrieval level


@dataclass(frozen=True)
class GoldRank:
    """A gold item of the question and its rank in each run's top k (None: not in the top k)."""

    item: str
    grade: int
    base_rank: int | None
    cand_rank: int | None


@dataclass(frozen=True)
class AnswerSide:
    text: str | None
    judge_scores: Mapping[str, float]  # judge -> score of the main judgement
    grades: Mapping[str, float]  # judge -> the person's grade of that judgement, where there is one


@dataclass(frozen=True)
class QuestionEvidence:
    change: QuestionChange
    base_retrieved: tuple[RetrievedItem, ...]
    cand_retrieved: tuple[RetrievedItem, ...]
    gold: tuple[GoldRank, ...]
    gold_recorded: bool  # False: a run written before gold was kept in its rows, nothing could be marked
    base_answer: AnswerSide | None  # only where the cell's metric is an answer metric
    cand_answer: AnswerSide | None


@dataclass(frozen=True)
class CellEvidence:
    retriever: str
    k: int
    metric: str
    result: str
    order: str  # WORSE_FIRST or BETTER_FIRST: how `questions` is sorted
    drops: int  # questions whose gate metric fell
    gains: int
    flips_down: int  # of those, success -> failure
    flips_up: int
    questions: tuple[QuestionEvidence, ...]  # the `top` that moved the cell most, in `order`

    @property
    def name(self) -> str:
        return f"{self.retriever}@{self.k}"


class JudgedCell(Protocol):
    """What the evidence reads of a gate cell (verdict/compare.py GateCell)."""

    name: str
    retriever: str
    k: int
    metric: str | None
    result: str
    delta: float | None


def evidence_of(cells: Sequence[JudgedCell], changes: Sequence[Sequence[QuestionChange]], deciding: Sequence[str],
                drops_first: bool, explain: Sequence[str], top: int, rows: tuple[RowIndex, RowIndex],
                graded: tuple[pd.DataFrame, pd.DataFrame]) -> list[CellEvidence]:
    """The evidence of the `deciding` cells (drops first when they decided a `worse` verdict, else gains first) and of
    those named in `explain` (in the direction of their delta); `changes[i]` are cells[i]'s moved questions.
    KeyError naming the cells there are for a name of `explain` that is none of them."""
    names = [c.name for c in cells]
    unknown = [name for name in explain if name not in names]
    if unknown:
        raise KeyError(f"no judged cell {', '.join(unknown)}; the cells are {', '.join(names) or 'none'}")
    out = []
    for cell, cell_changes in zip(cells, changes):
        if cell.name not in deciding and cell.name not in explain:
            continue
        worse = drops_first if cell.name in deciding else (cell.delta or 0.0) < 0
        out.append(cell_evidence(cell_changes, cell.retriever, cell.k, str(cell.metric), cell.result,
                                 WORSE_FIRST if worse else BETTER_FIRST, top, rows,
                                 is_answer_metric(str(cell.metric)), graded))
    return out


def change_record(change: QuestionChange) -> dict[str, Any]:
    return {**asdict(change), "diff": change.diff}


def evidence_record(e: CellEvidence) -> dict[str, Any]:
    """comparison.json's record of a cell's evidence (docs/runs.md)."""
    record = asdict(e)
    for question, source in zip(record["questions"], e.questions):
        question["change"] = change_record(source.change)
    return record


def question_changes(rows: pd.DataFrame, retriever: str, k: int, metric: str, threshold: float,
                     questions: Mapping[str, str | None]) -> list[QuestionChange]:
    """The questions of `rows` (query_id, base, cand: one cell's gate metric) whose value moved."""
    b, c = rows["base"].to_numpy(dtype=float), rows["cand"].to_numpy(dtype=float)
    moved = np.abs(c - b) > EPSILON
    return [
        QuestionChange(str(q), questions.get(q), retriever, k, metric, float(x), float(y),
                       bool((x >= threshold) != (y >= threshold)))
        for q, x, y in zip(rows["query_id"].to_numpy()[moved], b[moved], c[moved])
    ]


def ordered(changes: Iterable[QuestionChange], order: str) -> list[QuestionChange]:
    """Largest drop first (WORSE_FIRST) or largest gain first, ties by cell and question id."""
    sign = 1.0 if order == WORSE_FIRST else -1.0
    return sorted(changes, key=lambda ch: (sign * ch.diff, ch.retriever, ch.k, ch.query_id))


class RowIndex:
    """A run's results rows by (query_id, retriever, k), built once per run."""

    def __init__(self, run: Run) -> None:
        self.rows = {(r["query_id"], r["retriever"], int(r["k"])): r for r in run.results}

    def get(self, query_id: str, retriever: str, k: int) -> Mapping[str, Any] | None:
        return self.rows.get((query_id, retriever, k))


def cell_evidence(
    changes: Sequence[QuestionChange],
    retriever: str,
    k: int,
    metric: str,
    result: str,
    order: str,
    top: int,
    rows: tuple[RowIndex, RowIndex],
    answers: bool,
    graded: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> CellEvidence:
    """One cell's evidence from its moved questions (`changes`): the first `top` in `order`, each with both runs'
    retrieved lists and, where `answers` (the metric is an answer metric), both answers with their judge scores
    and the person's grades (`graded`: judged.graded_frame of base and candidate)."""
    questions = [
        question_evidence(change, *(index.get(change.query_id, retriever, k) or {} for index in rows), answers, graded)
        for change in ordered(changes, order)[:top]
    ]
    return CellEvidence(
        retriever, k, metric, result, order,
        drops=sum(1 for ch in changes if ch.diff < 0), gains=sum(1 for ch in changes if ch.diff > 0),
        flips_down=sum(1 for ch in changes if ch.flip and ch.diff < 0),
        flips_up=sum(1 for ch in changes if ch.flip and ch.diff > 0),
        questions=tuple(questions),
    )


def question_evidence(change: QuestionChange, base_row: Mapping[str, Any], cand_row: Mapping[str, Any],
                      answers: bool, graded: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> QuestionEvidence:
    """One question of a cell in both runs, from its results rows ({} where a run has none)."""
    gold_items, level, recorded = _gold(cand_row or base_row)
    base_list = _retrieved(base_row, gold_items, level)
    cand_list = _retrieved(cand_row, gold_items, level)
    gold = tuple(GoldRank(item, grade, _rank_of(item, base_list, level), _rank_of(item, cand_list, level))
                 for item, grade in gold_items.items())
    sides: tuple[AnswerSide | None, ...] = (None, None)
    if answers:
        sides = tuple(_answer(row, frame, change.query_id, change.retriever, change.k)
                      for row, frame in zip((base_row, cand_row), graded or (None, None)))
    return QuestionEvidence(change, base_list, cand_list, gold, recorded, *sides)


def _gold(row: Mapping[str, Any]) -> tuple[dict[str, int], str, bool]:
    """item -> grade of the question's relevant items, the level they are items of, and whether the row has any."""
    gold = row.get("gold")
    if not isinstance(gold, Mapping):
        return {}, "chunk", False
    return {str(g["id"]): int(g.get("grade") or 1) for g in gold.get("items") or []}, str(gold.get("level")), True


def _key(item: Mapping[str, Any], level: str) -> str | None:
    value = item.get("doc_id" if level == "doc" else "chunk_id")
    return None if value is None else str(value)


def _retrieved(row: Mapping[str, Any], gold: Mapping[str, int], level: str) -> tuple[RetrievedItem, ...]:
    items = []
    for item in row.get("retrieved") or []:
        where = " › ".join(str(p) for p in (item.get("rel_path"), item.get("heading_path")) if p) or None
        score = item.get("score")
        items.append(RetrievedItem(int(item["rank"]), item.get("chunk_id"), item.get("doc_id"), where,
                                   None if score is None else float(score), _key(item, level) in gold))
    return tuple(items)


def _rank_of(gold_item: str, retrieved: Sequence[RetrievedItem], level: str) -> int | None:
    for item in retrieved:
        if (item.doc_id if level == "doc" else item.chunk_id) == gold_item:
            return item.rank
    return None


def _answer(row: Mapping[str, Any], graded: pd.DataFrame | None, query_id: str, retriever: str,
            k: int) -> AnswerSide | None:
    if not row:
        return None
    scores: dict[str, float] = {}
    for j in row.get("judgments") or []:
        if int(j.get("replicate") or 0) == 0 and j.get("score") is not None:
            scores[str(j.get("judge"))] = float(j["score"])
    grades: dict[str, float] = {}
    if graded is not None and len(graded):
        mine = graded[(graded["query_id"] == query_id) & (graded["retriever"] == retriever) & (graded["k"] == k)
                      & graded["grade"].notna()]
        grades = {str(j): float(g) for j, g in zip(mine["judge"], mine["grade"])}
    answer = row.get("answer") or {}
    return AnswerSide(answer.get("text"), scores, grades)
