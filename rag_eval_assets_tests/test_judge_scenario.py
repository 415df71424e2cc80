"""Grades never make the gate blind (issue 29, point 1), end to end: `rag-eval run` over the sample data with a
scripted answerer and judge on loopback (judge_scenario.py), a dozen answers of each run graded, the verdict read
from the runs and from `rag-eval compare`.

- The answers really got worse; the judge, two points generous, gives every poor answer the same score, so it agrees
  with the person about nothing there. Before grading the raw judge scores fell (WORSE); after grading the calibrated
  means decide, whatever the judge's agreement: still WORSE, exit 1, never handed to the unmoved nDCG@k.
- The answers did not change; the judge turned two points harsher. Before grading that is WORSE on the raw scores;
  after grading the calibrated means see no change: exit 0.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.errors import InputError
from rag_eval_assets.labeling.judged_run import read_judged_answers
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.reports.judges import MEANS_EXPLAINED
from rag_eval_assets.runs.judge_inputs import JUDGE_INPUTS_FILE
from rag_eval_assets_tests.judge_scenario import QUALITY, Judge, grade, responder, write_config
from rag_eval_assets_tests.judged_runs import sample_evalset
from rag_eval_assets_tests.llm_fault_server import llm_fault_server

GRADED = 12


def runs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "store" / "runs").iterdir())


def comparison(run_dir: Path) -> dict:
    return json.loads((run_dir / "comparison.json").read_text(encoding="utf-8"))


def compare(config: Path, base: Path, cand: Path, out: Path, capsys) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["compare", "--config", str(config), "--base", base.name, "--cand", cand.name, "--out", str(out)])
    return code, json.loads((out / "comparison.json").read_text(encoding="utf-8")), capsys.readouterr().out


def test_worse_answers_stay_worse_after_grading_whatever_the_judge_agrees(tmp_path: Path, capsys,
                                                                          monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))  # an instance of its own
    evalset = sample_evalset(tmp_path)
    with llm_fault_server(responder=responder(Judge(bias=2))) as server:
        config = write_config(tmp_path, evalset, server.base_url, max_tokens=512)
        assert main(["run", "--config", str(config)]) == 0
        config = write_config(tmp_path, evalset, server.base_url, max_tokens=64)
        before = main(["run", "--config", str(config)])
        base, cand = runs(tmp_path)
        assert before == 1 and comparison(cand)["verdict"] == "worse"
        (cell,) = comparison(cand)["cells"]
        assert (cell["metric"], cell["estimate"]) == ("correctness", "paired")
        shows_exactly_the_run_it_names(tmp_path, base, cand)

        assert grade(evalset, base, good=True, n=GRADED) == GRADED
        assert grade(evalset, cand, good=False, n=GRADED) == GRADED
        after = main(["run", "--config", str(config)])
    regraded = runs(tmp_path)[-1]
    document = comparison(regraded)
    (cell,) = document["cells"]
    (judge,) = [j for j in document["judges"] if j["judge"] == "correctness"]
    print(json.dumps({"cell": cell, "judge": judge}, indent=1))
    assert document["base_run_id"] == base.name and after == 1 and document["verdict"] == "worse"
    assert (cell["metric"], cell["estimate"], cell["skipped"]) == ("correctness", "calibrated", [])
    assert (cell["n_graded_base"], cell["n_graded_cand"]) == (GRADED, GRADED)
    # The calibrated means are the grades' own: the judge's scores of the poor answers carry nothing.
    assert cell["base"] == pytest.approx(2.0, abs=0.5) and cell["cand"] < 0.5
    # Trust is over both runs' grades, and the judge is not trusted: that changes nothing where grades decide.
    assert judge["n"] == 2 * GRADED and judge["trusted"] is False
    # The report says so as summary.md does (issue 29, point 6): the gate's note, the means in plain words, and
    # the candidate's calibrated interval cut to the 0-5 scale.
    note = (f"bm25@3: correctness calibrated by the person's grades: {cell['base']:.2f} -> {cell['cand']:.2f}, "
            f"{cell['delta']:+.2f} [{cell['ci_low']:+.2f}, {cell['ci_high']:+.2f}], n {GRADED} grades of 14 answers in "
            f"the base run, {GRADED} grades of 14 answers in the candidate")
    summary, page = ((regraded / name).read_text(encoding="utf-8") for name in ("summary.md", REPORT_FILE))
    assert f"- {note}" in summary and f'<ul id="gate-notes"><li>{html.escape(note)}</li></ul>' in page
    assert MEANS_EXPLAINED in summary and html.escape(MEANS_EXPLAINED) in page
    # The judge gave all 14 answers 3: its interval is as wide as one disagreement would make it, not zero.
    assert (f"| correctness | bm25 | 3 | 14 | 3.00 | [2.85, 3.15], n 14 answers | {GRADED} | 0.17 | [0.00, 0.41], "
            f"n {GRADED} grades of 14 answers |") in summary

    code, compared, text = compare(config, base, cand, tmp_path / "cmp", capsys)
    assert code == 1 and compared["verdict"] == "worse" and compared["cells"][0]["estimate"] == "calibrated"
    assert "correctness (calibrated)" in text


def test_a_judge_that_drifted_alone_is_no_change_after_grading(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))  # an instance of its own
    evalset = sample_evalset(tmp_path)
    judge = Judge(bias=2)
    with llm_fault_server(responder=responder(judge)) as server:
        config = write_config(tmp_path, evalset, server.base_url, max_tokens=512)
        assert main(["run", "--config", str(config)]) == 0
        # The same answers judged anew by a judge turned harsher (the provider changed the model behind its name,
        # and the reply cache is gone).
        judge.bias = 0
        (tmp_path / "store" / "cache" / "llm.sqlite").unlink()
        before = main(["run", "--config", str(config), "--force"])
        base, cand = runs(tmp_path)
        assert before == 1 and comparison(cand)["verdict"] == "worse"
        # One set of grades applies to both runs: the judge saw the same inputs.
        assert grade(evalset, base, good=True, n=GRADED) == GRADED
        code, document, _ = compare(config, base, cand, tmp_path / "cmp", capsys)
    (cell,) = document["cells"]
    print(json.dumps(cell, indent=1))
    assert code == 0 and document["verdict"] == "no significant change"
    assert (cell["metric"], cell["estimate"], cell["n_graded_base"], cell["n_graded_cand"]) == (
        "correctness", "calibrated", GRADED, GRADED)


def shows_exactly_the_run_it_names(tmp_path: Path, base: Path, cand: Path) -> None:
    """Grading (issue 29, point 3) shows each run's own answers: the failed candidate's were never committed to the
    table store, whose judged_answers tables are the base run's, yet its run directory keeps its judge inputs."""
    stored = TableStore(tmp_path / "store" / "assets").locate
    for run_dir, grades in ((base, {"1", "2", "3"}), (cand, {"0", "1"})):
        run, answers, notes = read_judged_answers(run_dir, stored)
        assert notes == [f"judge inputs from {run_dir / JUDGE_INPUTS_FILE} (kept with the run)"]
        shown = {QUALITY.search(j.user_message()).group(1) for a in answers for j in a.judgments.values()
                 if j.judge == "correctness"}
        assert shown <= grades and len(answers) == 14, (run_dir.name, shown)
    # A run without its judge inputs (as written before they were kept) is refused with the reason, never shown with
    # the base run's answers, which the stored tables hold under the same questions.
    (cand / JUDGE_INPUTS_FILE).rename(tmp_path / "kept.jsonl")
    with pytest.raises(InputError) as refused:
        read_judged_answers(cand, stored)
    (tmp_path / "kept.jsonl").rename(cand / JUDGE_INPUTS_FILE)
    assert (f"run {cand.name} cannot be shown: it predates {JUDGE_INPUTS_FILE}, results.jsonl cuts its judge inputs, "
            "and the stored judged_answers tables hold none of them (this run failed, so its tables were never "
            "committed: ") in str(refused.value)
