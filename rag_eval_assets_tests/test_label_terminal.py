"""`rag-eval label` in a real terminal: tmux runs the command, real keystrokes label, the file and backup are read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets_tests.label_helpers import plain_questions
from rag_eval_assets_tests.real_components import unavailable
from rag_eval_assets_tests.sample_config import REPO, write_sample_config

TIMEOUT_S = 60


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def _wait_for(session: str, needle: str) -> str:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if needle in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} not on the screen within {TIMEOUT_S}s; it shows:\n{screen}")


def test_label_in_tmux_with_real_keystrokes(tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        unavailable("tmux is not installed")
    config = write_sample_config(tmp_path)
    evalset = plain_questions(tmp_path / "questions.jsonl")
    original = evalset.read_bytes()
    session = f"rag-eval-label-{uuid.uuid4().hex[:8]}"
    command = (f"{sys.executable} -m rag_eval_assets.cli label --config {config} --evalset {evalset} "
               f"--retriever bm25 --k 5; echo EXIT=$?; sleep 60")
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TERM": "xterm-256color"}
    _tmux("new-session", "-d", "-s", session, "-x", "140", "-y", "45", "-c", str(REPO),
          *[arg for name, value in env.items() for arg in ("-e", f"{name}={value}")], command)
    try:
        _wait_for(session, "1 / 3   chunk 1/5   selected 0")
        for key, shown in (("Down", "chunk 2/5"), ("Space", "selected 1"), ("Down", "chunk 3/5"),
                           ("Space", "selected 2"), ("n", "2 / 3"), ("a", "answerable no"), ("q", "EXIT=")):
            _tmux("send-keys", "-t", session, key)
            screen = _wait_for(session, shown)
    finally:
        _tmux("kill-session", "-t", session)
    assert "EXIT=0" in screen and "2 question(s) labeled and saved" in screen
    (backup,) = tmp_path.glob("questions.jsonl.bak-*")
    assert backup.read_bytes() == original
    assert f"backup: {backup}" in screen.replace("\n", "")
    first, second, third = load_evalset(evalset)
    assert (first.id, first.answerable, len(first.gold_supports)) == ("test_001", True, 2)
    assert (second.id, second.answerable, second.gold_supports) == ("test_009", False, ())
    assert third.raw == json.loads(original.decode().splitlines()[2])
