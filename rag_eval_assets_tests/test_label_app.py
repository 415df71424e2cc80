"""The labeler's Textual App driven by Textual's headless pilot over the sample corpus (bm25)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rag_eval_assets.corpus.chunking import ChunkerParams
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.labeling.app import QUIT_UNSAVED, SAVED_AND_QUIT, KeysScreen, LabelApp
from rag_eval_assets.labeling.progress import load_progress
from rag_eval_assets.labeling.resolution import ResolutionCheck
from rag_eval_assets.labeling.session import LabelSession
from rag_eval_assets.labeling.snippets import MAX_CHARS
from rag_eval_assets.corpus.gold import normalise_for_match
from rag_eval_assets_tests.label_helpers import bm25_source, plain_questions


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory):
    built = bm25_source(tmp_path_factory.mktemp("config"))
    yield built
    built.close()


def _run(app: LabelApp, *keys: str) -> None:
    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            for key in keys:
                await pilot.press(key)
                await pilot.pause()

    asyncio.run(drive())


def test_select_two_chunks_toggle_answerable_save_quit_and_resume(source, tmp_path: Path) -> None:
    evalset = plain_questions(tmp_path / "questions.jsonl")
    original = evalset.read_bytes()
    first, _, third = original.decode().splitlines()
    shown = source.top(load_evalset(evalset)[0], 5)
    check = ResolutionCheck(source.documents, "sample", ChunkerParams(800, 100))

    session = LabelSession(evalset, source, k=5, check=check)
    app = LabelApp(session)
    # Chunks at ranks 2 and 3 gold on question 1; question 2 unanswerable; on to question 3; save; quit.
    _run(app, "down", "space", "down", "space", "n", "a", "enter", "s", "q")

    assert app.return_value == SAVED_AND_QUIT
    assert [r.written for r in app.saves] == [["test_001", "test_009"], []]  # s, then q saves nothing new
    assert app.saves[0].problems == []
    backups = list(tmp_path.glob("questions.jsonl.bak-*"))
    assert backups == [app.saves[0].backup] and backups[0].read_bytes() == original

    line1, line2, line3 = evalset.read_text(encoding="utf-8").splitlines()
    record1, record2 = json.loads(line1), json.loads(line2)
    assert list(record1) == ["id", "question", "answerable", "gold_supports"]
    assert (record1["id"], record1["question"]) == (json.loads(first)["id"], json.loads(first)["question"])
    assert record1["answerable"] is True
    assert [(s["rel_path"], s["heading_path"]) for s in record1["gold_supports"]] == [
        (c.rel_path, c.heading_path) for c in shown[1:3]
    ]
    for support, chunk in zip(record1["gold_supports"], shown[1:3]):
        assert 1 <= len(support["snippets"]) <= 2
        for snippet in support["snippets"]:
            assert len(snippet) <= MAX_CHARS
            assert normalise_for_match(chunk.text).count(normalise_for_match(snippet)) == 1
    assert record2 == {"id": "test_009", "question": json.loads(original.decode().splitlines()[1])["question"],
                       "answerable": False}
    assert line3 == third  # the question not labeled is byte for byte what it was
    assert load_progress(evalset).position == "test_002"

    # Resume: the unlabeled question is all that --only unlabeled shows, and the saved gold is on screen again.
    resumed = LabelSession(evalset, source, k=5, only="unlabeled")
    assert resumed.order == ["test_002"] and resumed.question.id == "test_002"
    everything = LabelSession(evalset, source, k=5)
    assert everything.question.id == "test_002"
    everything.move(-2)
    assert everything.decision.selected == {c.chunk_id for c in shown[1:3]}
    assert not everything.dirty


def test_status_line_keys_screen_and_ctrl_c_keeps_only_what_was_saved(source, tmp_path: Path) -> None:
    evalset = plain_questions(tmp_path / "questions.jsonl")
    app = LabelApp(LabelSession(evalset, source, k=5))
    seen: dict[str, object] = {}

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("space", "down", "space")
            await pilot.pause()
            seen["status"] = str(app.query_one("#status").render())
            await pilot.press("s", "n", "question_mark")
            await pilot.pause()
            seen["screen"] = type(app.screen)
            await pilot.press("escape", "a", "ctrl+c")
            await pilot.pause()

    asyncio.run(drive())
    assert "1 / 3" in seen["status"] and "selected 2" in seen["status"] and "unsaved changes" in seen["status"]
    assert seen["screen"] is KeysScreen
    assert app.return_value == QUIT_UNSAVED
    saved = load_evalset(evalset)
    assert len(saved[0].gold_supports) == 2
    assert saved[1].answerable  # marked unanswerable after the save, then ctrl+c: not written
