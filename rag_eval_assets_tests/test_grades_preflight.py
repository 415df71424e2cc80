"""A bad grades file stops `rag-eval run` in preflight (issue 29, point 5): exit 2, every problem as file:line: field,
no exception class name, and nothing computed or stored after it."""

from __future__ import annotations

import json
from pathlib import Path

from rag_eval_assets.cli import main
from rag_eval_assets.judging.grades import grades_path
from rag_eval_assets_tests.judged_runs import sample_evalset
from rag_eval_assets_tests.sample_config import write_sample_config

GOOD = {"query_id": "test_001", "judge": "correctness", "judge_input_sha256": "a" * 64, "grade": 3,
        "judge_prompt_version": "v1"}


def test_a_bad_grade_stops_the_run_in_preflight(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))  # an instance of its own, never the one make exports
    evalset = sample_evalset(tmp_path)
    path = grades_path(evalset)
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "query_id": "test_002", "grade": 9}) + "\n"
                    + "{not json\n", encoding="utf-8")
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\n",
                                 evalset=evalset)
    assert main(["run", "--config", str(config)]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert out.out.startswith(f"run failed (exit 2): preflight: 2 problem(s) in input: - {path}:2: field 'grade': "
                              f"expected an integer 0-5, got 9 - {path}:3: invalid JSON: Expecting property name "
                              "enclosed in double quotes")
    assert "InputError" not in text
    # Nothing after preflight ran: no table, no run directory (only the failed run's log).
    assert "evalset                                      not run: missing" in text
    assert [p.name.startswith("failed-") for p in (tmp_path / "store" / "runs").iterdir()] == [True]
