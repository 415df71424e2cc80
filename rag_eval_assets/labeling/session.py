"""A labeling session: the questions shown, what the person marked on each, saving and resuming.

The terminal App (app.py) only renders this object and calls its methods, so everything it does can be driven
and tested without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.load import load_evalset_with_warnings
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.labeling.candidates import Candidate
from rag_eval_assets.labeling.evalset_file import backup, read_record, save_records
from rag_eval_assets.labeling.labels import WRITABLE_FORMATS, gold_on_screen, updated_record
from rag_eval_assets.labeling.progress import Progress, load_progress, save_progress
from rag_eval_assets.labeling.resolution import ResolutionCheck
from rag_eval_assets.labeling.selection import select


class CandidateSource(Protocol):
    name: str

    def top(self, question: Question, k: int) -> list[Candidate]: ...

    def neighbours(self, candidate: Candidate) -> list[str]: ...


@dataclass
class Decision:
    """What the person has marked on one question; compared with what the file says to tell unsaved changes."""

    selected: set[str]
    answerable: bool
    saved_selected: set[str] = field(default_factory=set)
    saved_answerable: bool = True

    @property
    def changed(self) -> bool:
        return self.selected != self.saved_selected or self.answerable != self.saved_answerable


@dataclass(frozen=True)
class SaveResult:
    written: list[str]  # ids of the questions whose lines changed
    backup: Path | None  # made by this save (the session's first)
    problems: list[str]  # labels that resolve to no chunk at some chunk size, with why


class LabelSession:
    def __init__(self, evalset: Path, source: CandidateSource, k: int = 20, only: str = "all",
                 failing: set[str] | None = None, check: ResolutionCheck | None = None):
        self.path = Path(evalset)
        self.source = source
        self.k = k
        self.check = check
        loaded = load_evalset_with_warnings(self.path)
        if loaded.format not in WRITABLE_FORMATS:
            raise InputError([InputProblem(str(self.path), None, None, f"rag-eval label writes "
                                           f"{' and '.join(WRITABLE_FORMATS)} files; this one is {loaded.format}")])
        self.format = loaded.format
        self._questions = {q.id: q for q in loaded.questions}
        self.order = [q.id for q in select(loaded.questions, only, failing)]
        self.progress: Progress = load_progress(self.path)
        self.index = self.order.index(self.progress.position) if self.progress.position in self.order else 0
        self.backup: Path | None = None
        self._candidates: dict[str, list[Candidate]] = {}
        self._decisions: dict[str, Decision] = {}
        if self.order:
            self._visit()

    # What is shown.

    @property
    def question(self) -> Question:
        return self._questions[self.order[self.index]]

    @property
    def candidates(self) -> list[Candidate]:
        qid = self.order[self.index]
        if qid not in self._candidates:
            self._candidates[qid] = self.source.top(self.question, self.k)
        return self._candidates[qid]

    @property
    def decision(self) -> Decision:
        qid = self.order[self.index]
        if qid not in self._decisions:
            gold = gold_on_screen(self.question, self.candidates)
            answerable = not self.question.is_negative
            self._decisions[qid] = Decision(set(gold), answerable, set(gold), answerable)
        return self._decisions[qid]

    @property
    def dirty(self) -> bool:
        return any(d.changed for d in self._decisions.values())

    # What the keys do.

    def toggle(self, position: int) -> str | None:
        """Mark or unmark the chunk at `position` in the shown list; a message when that cannot be done."""
        decision = self.decision
        if not decision.answerable:
            return "the question is marked unanswerable: press a to make it answerable before marking gold"
        chunk_id = self.candidates[position].chunk_id
        decision.selected ^= {chunk_id}
        return None

    def toggle_answerable(self) -> None:
        decision = self.decision
        decision.answerable = not decision.answerable
        if not decision.answerable:
            decision.selected = set()  # an unanswerable question carries no gold

    def move(self, step: int) -> bool:
        """Go `step` questions on (or back); False at either end."""
        target = self.index + step
        if not 0 <= target < len(self.order):
            return False
        self.index = target
        self._visit()
        return True

    def _visit(self) -> None:
        qid = self.order[self.index]
        self.progress.position = qid
        if qid not in self.progress.visited:
            self.progress.visited.append(qid)
        save_progress(self.path, self.progress)

    def save(self) -> SaveResult:
        """Write every changed question into the file (atomically, after a backup on the session's first save),
        load it back, and check that what was written resolves at three chunk sizes."""
        changed = {qid: d for qid, d in self._decisions.items() if d.changed}
        made_backup = None
        if changed:
            if self.backup is None:
                self.backup = made_backup = backup(self.path)
            records = {}
            for qid, d in changed.items():
                q = self._questions[qid]
                assert q.source_line is not None
                records[q.source_line] = updated_record(read_record(self.path, q.source_line), q,
                                                        self._candidates[qid], d.selected, d.answerable,
                                                        self.source.neighbours)
            reloaded = save_records(self.path, records)
            self._questions = {q.id: q for q in reloaded}
            for qid, d in changed.items():
                # What the file now says, seen on the shown chunks, is the new baseline for unsaved changes.
                gold = gold_on_screen(self._questions[qid], self._candidates[qid])
                answerable = not self._questions[qid].is_negative
                self._decisions[qid] = Decision(set(gold), answerable, set(gold), answerable)
        save_progress(self.path, self.progress)
        problems = self.check.problems([self._questions[qid] for qid in changed]) if self.check and changed else []
        return SaveResult(list(changed), made_backup, problems)
