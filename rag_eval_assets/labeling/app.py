"""The full-screen labeler (Textual): shows a LabelSession and turns keys into its calls."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import ListItem, ListView, Static

from rag_eval_assets.labeling.candidates import Candidate
from rag_eval_assets.labeling.session import LabelSession

KEYS = """\
up / down   move between chunks
space       mark / unmark the chunk as gold
a           answerable / unanswerable
n, enter    next question
p           previous question
s           save
q           save and quit
ctrl+c      quit without saving (what was saved stays)
?           these keys (any key closes)"""

# Outcomes the App hands back to the command.
SAVED_AND_QUIT, QUIT_UNSAVED = "saved", "quit"


class KeysScreen(ModalScreen[None]):
    DEFAULT_CSS = "KeysScreen { align: center middle; } #keys { width: 64; border: round $accent; padding: 1 2; }"

    def __init__(self, keys: str = KEYS):
        super().__init__()
        self.key_text = keys

    def compose(self) -> ComposeResult:
        yield Static(self.key_text, id="keys", markup=False)

    def on_key(self) -> None:
        self.dismiss()


class LabelApp(App[str]):
    TITLE = "rag-eval label"
    CSS = """
    #status { dock: top; height: 1; background: $accent; color: $text; }
    #question { padding: 0 1; text-style: bold; }
    #labels { padding: 0 1; color: $text-muted; }
    #message { dock: bottom; height: auto; max-height: 6; padding: 0 1; background: $panel; }
    ListItem { padding: 0 1; border-bottom: solid $panel; }
    """
    BINDINGS = [
        Binding("space", "toggle", "gold", priority=True),
        Binding("a", "answerable", "answerable"),
        Binding("n,enter", "next", "next", priority=True),
        Binding("p", "previous", "previous"),
        Binding("s", "save", "save"),
        Binding("q", "save_quit", "save+quit"),
        Binding("question_mark", "keys", "keys"),
        Binding("ctrl+c", "quit_unsaved", "quit", priority=True, show=False),
    ]

    def __init__(self, session: LabelSession):
        super().__init__()
        self.session = session
        self.saves: list = []  # every SaveResult of the session, for the command's closing lines

    def compose(self) -> ComposeResult:
        yield Static(id="status", markup=False)
        yield Static(id="question", markup=False)
        yield Static(id="labels", markup=False)
        yield ListView(id="chunks")
        yield Static("? shows the keys", id="message", markup=False)

    async def on_mount(self) -> None:
        await self._show_question()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While the keys are shown, keys only close that screen (ctrl+c still quits).
        return action == "quit_unsaved" or not isinstance(self.screen, KeysScreen)

    # Rendering.

    async def _show_question(self) -> None:
        s = self.session
        q = s.question
        self.query_one("#question", Static).update(f"{q.id}: {q.question}")
        self.query_one("#labels", Static).update(_labels_text(s))
        chunks = self.query_one("#chunks", ListView)
        await chunks.clear()
        await chunks.extend(ListItem(Static(self._chunk_text(c), markup=False)) for c in s.candidates)
        chunks.index = 0 if s.candidates else None
        chunks.focus()
        self._refresh_status()

    def _chunk_text(self, c: Candidate) -> Text:
        mark = "[x]" if c.chunk_id in self.session.decision.selected else "[ ]"
        parts = ", ".join(f"{name} {_score(value)}" for name, value in c.components)
        page = f"  p.{c.page}" if c.page is not None else ""
        text = Text()
        text.append(f"{mark} #{c.rank}  score {_score(c.score)} ({parts})\n", style="bold green" if mark == "[x]" else "bold")
        text.append(f"{c.rel_path}  ›  {c.heading_path or '(before any heading)'}{page}\n", style="cyan")
        text.append(c.text)
        return text

    def _refresh_chunk(self, position: int) -> None:
        chunks = self.query_one("#chunks", ListView)
        chunks.children[position].query_one(Static).update(self._chunk_text(self.session.candidates[position]))

    def _refresh_status(self) -> None:
        s = self.session
        d = s.decision
        changes = "● unsaved changes" if s.dirty else "saved"
        at = self.query_one("#chunks", ListView).index
        status = (f" {s.index + 1} / {len(s.order)}   chunk {'-' if at is None else at + 1}/{len(s.candidates)}   "
                  f"selected {len(d.selected)}   "
                  f"answerable {'yes' if d.answerable else 'no'}   {changes}   [{s.source.name}, k={s.k}]   ? keys")
        self.query_one("#status", Static).update(status)

    def _say(self, message: str) -> None:
        self.query_one("#message", Static).update(message)

    def on_list_view_highlighted(self) -> None:
        self._refresh_status()

    # Keys.

    def action_toggle(self) -> None:
        chunks = self.query_one("#chunks", ListView)
        if chunks.index is None:
            return
        refused = self.session.toggle(chunks.index)
        if refused:
            self._say(refused)
        self._refresh_chunk(chunks.index)
        self._refresh_status()

    def action_answerable(self) -> None:
        self.session.toggle_answerable()
        for position in range(len(self.session.candidates)):
            self._refresh_chunk(position)
        self._refresh_status()

    async def action_next(self) -> None:
        if self.session.move(1):
            await self._show_question()
        else:
            self._say("this is the last question (s saves, q saves and quits)")

    async def action_previous(self) -> None:
        if self.session.move(-1):
            await self._show_question()
        else:
            self._say("this is the first question")

    def action_save(self) -> bool:
        try:
            result = self.session.save()
        except Exception as exc:  # the file is as it was before this save; say why and keep the labels
            self._say(f"NOT saved: {exc}")
            return False
        self.saves.append(result)
        lines = [f"saved {len(result.written)} question(s) to {self.session.path}"]
        if result.backup:
            lines.append(f"backup: {result.backup}")
        lines.extend(f"does not resolve: {p}" for p in result.problems)
        self._say("\n".join(lines))
        self.query_one("#labels", Static).update(_labels_text(self.session))
        self._refresh_status()
        return True

    def action_save_quit(self) -> None:
        if self.action_save():
            self.exit(SAVED_AND_QUIT)

    def action_quit_unsaved(self) -> None:
        self.exit(QUIT_UNSAVED)

    def action_keys(self) -> None:
        self.push_screen(KeysScreen())


def _labels_text(s: LabelSession) -> str:
    q = s.question
    lines = [f"in the file: answerable {'yes' if not q.is_negative else 'no'}"]
    lines += [f"  support {g.rel_path} › {g.heading_path or '(any heading)'}  {list(g.snippets)}" for g in q.gold_supports]
    if q.gold_doc_ids or q.gold_chunk_ids:
        lines.append(f"  gold_doc_ids {list(q.gold_doc_ids)}  gold_chunk_ids {list(q.gold_chunk_ids)}")
    if len(lines) == 1 and not q.is_negative:
        lines.append("  no gold yet")
    return "\n".join(lines)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
