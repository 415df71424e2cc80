"""The full-screen grader (Textual): shows a GradeSession and turns keys into its calls."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.labeling.app import KeysScreen
from rag_eval_assets.labeling.grade_session import GradeSession
from rag_eval_assets.judging.grades import judge_definition

KEYS = """\
0-5         grade the selected metric (saved); its judge score shows, and with
            "after a grade: next metric" (the status line) the next metric still to grade is selected
a           after a grade: select the next metric, or stay on this one (to grade again, say)
tab, m      select the other metric
n, enter    next answer
s           skip this answer: marked skipped on the status line, not counted as graded, nothing
            written; grading it later clears the mark; the next session offers it again
p           previous answer
up / down   scroll the answer
q           quit (every grade is already saved)
?           these keys (any key closes)"""
HIDDEN = "hidden until you grade"


class GradeApp(App[None]):
    TITLE = "rag-eval label --grade"
    CSS = """
    #status { dock: top; height: 1; background: $accent; color: $text; }
    #body { padding: 0 1; }
    #footer { dock: bottom; height: auto; }
    #grading { height: auto; padding: 0 1; border-top: solid $accent; }
    #message { height: auto; max-height: 4; padding: 0 1; background: $panel; }
    """
    BINDINGS = [
        *(Binding(str(n), f"grade({n})", show=False) for n in range(10)),
        Binding("tab,m", "switch", "metric", priority=True),
        Binding("n,enter", "move(1)", "next", priority=True),
        Binding("s", "skip", "skip"),
        Binding("a", "advance", "after a grade"),
        Binding("p", "move(-1)", "previous"),
        Binding("q", "quit_grading", "quit"),
        Binding("question_mark", "keys", "keys"),
        Binding("ctrl+c", "quit_grading", "quit", priority=True, show=False),
    ]

    def __init__(self, session: GradeSession):
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        yield Static(id="status", markup=False)
        with Vertical(id="footer"):
            yield Static(id="grading", markup=False)
            yield Static("? shows the keys", id="message", markup=False)
        with VerticalScroll(id="body"):
            yield Static(id="answer", markup=False)

    def on_mount(self) -> None:
        self._show_answer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While the keys are shown, keys only close that screen (ctrl+c still quits).
        return action == "quit_grading" or not isinstance(self.screen, KeysScreen)

    # Rendering.

    def _show_answer(self) -> None:
        s = self.session
        answer = s.item.answer
        first = next(iter(answer.judgments.values()))
        # The correctness judge sees the reference too; either judge saw the same question, context and answer.
        shown = next((fields for j in answer.judgments.values() if (fields := j.fields()) and "reference" in fields),
                     None) or first.fields()
        text = Text()
        if shown is None:
            _section(text, "question", answer.question)
            _section(text, "gold", _gold(s.questions.get(answer.query_id), None))
            _section(text, "what the judge was sent", first.user_message())
        else:
            _section(text, "question", shown["question"])
            _section(text, "gold", _gold(s.questions.get(answer.query_id), shown.get("reference")))
            _section(text, f"context ({answer.retriever}, k={answer.k})", shown["contexts"])
            _section(text, "answer", shown["answer"])
        self.query_one("#answer", Static).update(text)
        body = self.query_one("#body", VerticalScroll)
        body.scroll_home(animate=False)
        body.focus()
        self._refresh()

    def _refresh(self) -> None:
        s = self.session
        answer = s.item.answer
        status = (f" {s.index + 1} / {len(s.items)}   graded {s.graded}   skipped {len(s.skipped)}   "
                  f"{answer.query_id}{' (skipped)' if s.is_skipped else ''}   "
                  f"[{answer.retriever}, k={answer.k}]   grading {s.judge}   "
                  f"after a grade: {'next metric' if s.advance else 'stay'} (a)   ? keys")
        self.query_one("#status", Static).update(status)
        text = Text()
        for judge in s.item.judges:
            grade = s.grade_of(judge)
            scale = s.scale(judge)
            selected = judge == s.judge
            text.append(f"{'▶' if selected else ' '} {judge} ({min(scale)}-{max(scale)})",
                        style="bold" if selected else "")
            text.append(f"   your grade {'-' if grade is None else grade}")
            score = answer.judgments[judge].score
            text.append(f"   judge {HIDDEN if grade is None else _number(score)}\n",
                        style="" if grade is None else "bold green" if grade == score else "bold yellow")
        j = s.judgment
        text.append(f"{s.judge}, as the judge is told: {judge_definition(s.judge, j.judge_prompt_version)}",
                    style="italic")
        self.query_one("#grading", Static).update(text)

    def _say(self, message: str) -> None:
        self.query_one("#message", Static).update(message)

    # Keys.

    def action_grade(self, value: int) -> None:
        judge = self.session.judge
        try:
            refused = self.session.grade(value)
        except Exception as exc:  # the file is as it was before this grade; say why and keep going
            self._say(f"NOT saved: {exc}")
            return
        if refused:
            self._say(refused)
        else:
            backup = f" (backup: {self.session.backup})" if self.session.backup and self.session.saved == 1 else ""
            self._say(f"{judge} {value} saved to {self.session.path}{backup}")
        self._refresh()

    def action_advance(self) -> None:
        self.session.advance = not self.session.advance
        self._say("after a grade: " + ("the next metric still to grade is selected" if self.session.advance
                                       else "the metric stays selected"))
        self._refresh()

    def action_switch(self) -> None:
        self.session.switch_metric()
        self._refresh()

    def action_move(self, step: int) -> None:
        if self.session.move(step):
            self._show_answer()
        else:
            self._say("this is the last answer (q quits)" if step > 0 else "this is the first answer")

    def action_skip(self) -> None:
        skipped = self.session.index
        refused = self.session.skip()
        if self.session.index != skipped:
            self._show_answer()
        else:
            self._refresh()
        marked = f"answer {skipped + 1} skipped: nothing written, not counted as graded" \
            if skipped in self.session.skipped else f"answer {skipped + 1} is graded: nothing to skip"
        self._say(refused or marked)

    def action_quit_grading(self) -> None:
        self.exit()

    def action_keys(self) -> None:
        self.push_screen(KeysScreen(KEYS))


def _section(text: Text, title: str, body: str) -> None:
    text.append(f"{title}\n", style="bold cyan")
    text.append(f"{body.strip() or '(empty)'}\n\n")


def _gold(question: Question | None, reference: str | None) -> str:
    """What the evalset says a good answer holds: the reference answer or key facts, and the gold passages."""
    if question is None:
        return f"(not in the evalset)  reference the judge saw: {reference}" if reference else "(not in the evalset)"
    lines = []
    if not question.answerable or question.is_negative:
        lines.append("unanswerable: the corpus does not hold the answer")
    if question.reference_answer:
        lines.append(f"reference answer: {question.reference_answer}")
    if question.expected_key_facts:
        lines.append(f"key facts: {'; '.join(question.expected_key_facts)}")
    lines += [f"gold passage: {g.rel_path} › {g.heading_path or '(any heading)'}"
              + (f"  {list(g.snippets)}" if g.snippets else "") for g in question.gold_supports]
    if question.gold_chunk_ids or question.gold_doc_ids:
        lines.append(f"gold_chunk_ids {list(question.gold_chunk_ids)}  gold_doc_ids {list(question.gold_doc_ids)}")
    return "\n".join(lines) or "no gold in the evalset"


def _number(value: float) -> str:
    return f"{value:g}"
