"""A grading session: the answers shown, the person's grade of each judge metric, saving and resuming.

Plain Python like session.py: the grading App (grade_app.py) only renders this object and calls its methods. Every
grade is written at once (atomically, after a backup of the grades file on the session's first write), so a
session that stops anyhow loses nothing; the next session over the same sample starts at its first answer with a
metric still to grade.

A skip (`skip`) is the session's only: it writes nothing, so the grades file, which the pipeline reads, holds grades
alone, and the next session offers a skipped answer again like any answer still to grade (the sample is the same, and
an answer passed over once may be gradable later, with the gold at hand).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.judging.grades import Grade, GradeKey, judge_scale, load_grades, save_grades
from rag_eval_assets.labeling.evalset_file import backup
from rag_eval_assets.labeling.judged_run import JudgedAnswer, Judgment
from rag_eval_assets.runs.store import TIMESTAMP_FORMAT


@dataclass(frozen=True)
class GradeItem:
    answer: JudgedAnswer
    judges: tuple[str, ...]  # the metrics to grade on this answer


class GradeSession:
    def __init__(self, items: Sequence[GradeItem], grades_file: Path, run_id: str,
                 questions: dict[str, Question] | None = None):
        self.items = list(items)
        self.path = grades_file
        self.run_id = run_id
        self.questions = questions or {}
        self.grades = load_grades(grades_file)
        self.backup: Path | None = None  # made before the session's first write, of a file graded before
        self.written: set[GradeKey] = set()  # the grades this session wrote (a grade given again counts once)
        self.advance = True  # after a grade, select the next metric still to grade (else stay on this one)
        self.skipped: set[int] = set()  # indexes of the answers skipped in this session and not graded since
        todo = [n for n, item in enumerate(self.items) if self._ungraded(item)]
        self.index = todo[0] if todo else 0
        self.judge = self._first_ungraded_judge()

    # What is shown.

    @property
    def item(self) -> GradeItem:
        return self.items[self.index]

    @property
    def judgment(self) -> Judgment:
        return self.item.answer.judgments[self.judge]

    def grade_of(self, judge: str) -> int | None:
        """The person's grade of this answer's `judge` metric; until there is one the judge's score stays hidden."""
        j = self.item.answer.judgments[judge]
        found = self.grades.get(GradeKey(self.item.answer.query_id, judge, j.sha256))
        return None if found is None else found.grade

    def scale(self, judge: str) -> tuple[int, ...]:
        return judge_scale(judge, self.item.answer.judgments[judge].judge_prompt_version)

    @property
    def graded(self) -> int:
        """Answers of the session with every metric graded (a skipped answer never is)."""
        return sum(not self._ungraded(item) for item in self.items)

    @property
    def is_skipped(self) -> bool:
        return self.index in self.skipped

    # What the keys do.

    @property
    def saved(self) -> int:
        """Grades this session wrote: lines of the grades file it added or changed."""
        return len(self.written)

    def grade(self, value: int) -> str | None:
        """Grade the selected metric `value` and write the file; then, with `advance`, select the next metric still
        to grade. A message when `value` is off the judge's scale."""
        scale = self.scale(self.judge)
        if value not in scale:
            return f"{self.judge} is graded {min(scale)}-{max(scale)}"
        answer, j = self.item.answer, self.judgment
        grade = Grade(answer.query_id, self.judge, j.sha256, value, j.judge_prompt_version, j.judge_model, j.score,
                      self.run_id, answer.retriever, answer.k, datetime.now(timezone.utc).strftime(TIMESTAMP_FORMAT))
        grades = {**self.grades, grade.key: grade}
        if self.backup is None and self.saved == 0 and self.path.exists():
            self.backup = backup(self.path)
        save_grades(self.path, grades.values())
        self.grades = grades
        self.written.add(grade.key)
        self.skipped.discard(self.index)
        if self.advance:
            self.judge = self._first_ungraded_judge(after=self.judge)
        return None

    def switch_metric(self) -> None:
        judges = self.item.judges
        self.judge = judges[(judges.index(self.judge) + 1) % len(judges)]

    def move(self, step: int) -> bool:
        """Go `step` answers on (or back); False at either end."""
        target = self.index + step
        if not 0 <= target < len(self.items):
            return False
        self.index = target
        self.judge = self._first_ungraded_judge()
        return True

    def skip(self) -> str | None:
        """Mark the answer skipped, unless every metric of it is graded, and go to the next one; a message when it
        is graded (nothing to skip) or the last answer."""
        if not self._ungraded(self.item):
            return None if self.move(1) else "this answer is graded, and the last one (q quits)"
        self.skipped.add(self.index)
        return None if self.move(1) else "skipped; this is the last answer (q quits)"

    def _ungraded(self, item: GradeItem) -> bool:
        return any(self.grades.get(GradeKey(item.answer.query_id, judge, item.answer.judgments[judge].sha256)) is None
                   for judge in item.judges)

    def _first_ungraded_judge(self, after: str | None = None) -> str:
        """The first metric of the answer still to grade (after `after`, round to the start); `after` itself, or
        the first metric, when every one is graded."""
        judges = self.item.judges
        start = judges.index(after) + 1 if after is not None else 0
        for judge in judges[start:] + judges[:start]:
            if self.grade_of(judge) is None:
                return judge
        return after if after is not None else judges[0]
