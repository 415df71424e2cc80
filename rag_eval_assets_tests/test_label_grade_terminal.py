"""`rag-eval label --grade` in a real terminal: tmux runs the command over a real run, real keystrokes grade, the
grades file is read."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

import pandas as pd

from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.generation.judges import judge_input_sha256
from rag_eval_assets.judging.grades import grades_path
from rag_eval_assets.labeling.judged_run import read_judged_answers, stratified_sample
from rag_eval_assets_tests.judged_runs import TWO_RETRIEVERS, judged_run, sample_evalset
from rag_eval_assets_tests.real_components import unavailable
from rag_eval_assets_tests.sample_config import REPO
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.test_label_terminal import _tmux, _wait_for


def test_grade_in_tmux_with_real_keystrokes(tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        unavailable("tmux is not installed")
    evalset = sample_evalset(tmp_path)
    config, run_dir = judged_run(tmp_path, TWO_RETRIEVERS + "k_values: [3]\nanswering: {k_values: [3]}\n", evalset)
    session = f"rag-eval-grade-{uuid.uuid4().hex[:8]}"
    command = (f"{sys.executable} -m rag_eval_assets.cli label --config {config} --evalset {evalset} "
               f"--grade {run_dir.name} --n 2 --seed 5; echo EXIT=$?; sleep 60")
    env = {"PYTHONPATH": str(REPO), "TERM": "xterm-256color"}
    _tmux("new-session", "-d", "-s", session, "-x", "140", "-y", "45", "-c", str(REPO),
          *[arg for name, value in env.items() for arg in ("-e", f"{name}={value}")], command)
    try:
        _wait_for(session, "1 / 2   graded 0")
        # Answer 1: groundedness 4, correctness 1; answer 2: groundedness 0, then quit.
        for key, shown in (("4", "your grade 4"), ("1", "graded 1"), ("Enter", "2 / 2"), ("0", "your grade 0"),
                           ("q", "EXIT=")):
            _tmux("send-keys", "-t", session, key)
            screen = _wait_for(session, shown)
    finally:
        _tmux("kill-session", "-t", session)
    path = grades_path(evalset)
    assert "EXIT=0" in screen and f"3 grade(s) written to {path}; 1 of 2 answer(s) fully graded, 0 skipped" in \
        screen.replace("\n", "")
    first, second = stratified_sample(read_judged_answers(run_dir, TableStore(tmp_path / "store" / "assets").locate)[1],
                                      2, 5)
    table = _judged(tmp_path / "store" / "assets")
    expected = []
    for answer, judge, grade in ((first, "groundedness", 4), (first, "correctness", 1), (second, "groundedness", 0)):
        row = table.loc[(answer.query_id, answer.retriever, judge)]
        expected.append((answer.query_id, judge, judge_input_sha256(row["judge_input"]), grade, row["score"]))
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert sorted((r["query_id"], r["judge"], r["judge_input_sha256"], r["grade"], r["judge_score"]) for r in lines) \
        == sorted(expected)
    assert first.query_id != second.query_id  # three grades, three keys


def _judged(assets: Path) -> pd.DataFrame:
    tables = [stored_table(assets, f"judged_answers/retriever={r}/k=3") for r in ("bm25", "bm25_tuned")]
    return pd.concat(tables, ignore_index=True).set_index(["query_id", "retriever", "judge"])
