"""End to end with the local llama.cpp judge (SmolLM2-135M on loopback): `rag-eval run` on the sample data, five
grades typed in the grading app (the Textual pilot), `rag-eval run` again, and the report showing the judge's
agreement with the person (n = 5, too few to say much, and said so) beside a calibrated estimate.

The tiny model proves the plumbing, not judgement quality: its figures are whatever it scored."""

from __future__ import annotations

import asyncio

import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.judging.grades import grades_path, load_grades
from rag_eval_assets.labeling.grade_app import GradeApp
from rag_eval_assets.labeling.grade_session import GradeItem, GradeSession
from rag_eval_assets.labeling.judged_run import read_judged_answers, stratified_sample
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.store import read_run
from rag_eval_assets_tests.llama_server import SMOLLM2_ALIAS, running_smollm2
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config

GRADES = (3, 4, 2, 5, 1)


@pytest.fixture(scope="module")
def server_url():
    with running_smollm2() as url:
        yield url


def _type_grades(session: GradeSession) -> None:
    """Grade each answer's groundedness with the keyboard, moving on to the next answer after each."""
    keys = [key for value in GRADES for key in (str(value), "n")][:-1]

    async def drive() -> None:
        async with GradeApp(session).run_test(size=(120, 40)) as pilot:
            for key in keys:
                await pilot.press(key)
                await pilot.pause()

    asyncio.run(drive())


def test_run_grade_five_answers_run_again_and_the_report_shows_agreement_and_calibrated_estimate(
        tmp_path, server_url, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    evalset = tmp_path / "eval_set.jsonl"
    # Ten questions: every call of the tiny model takes seconds on a small machine, and six of them get a scored
    # groundedness judgement (SmolLM2's replies may fail their schema; this run accepts any error rate).
    evalset.write_text("".join(SAMPLE_EVALSET.read_text(encoding="utf-8").splitlines(keepends=True)[:10]),
                       encoding="utf-8")
    config = write_sample_config(
        tmp_path, "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\nquery_generation: {n_chunks: 1}\n"
        f"llm: {{base_url: '{server_url}', model: {SMOLLM2_ALIAS}, max_tokens: 128, max_error_rate: 1.0}}\n",
        evalset=evalset)
    assert main(["--config", str(config), "run"]) == 0
    capsys.readouterr()
    (first_dir,) = list_runs(tmp_path / "store" / "runs")
    assert "no grades yet: rag-eval label --grade RUN" in read_run(first_dir).summary

    # What `rag-eval label --grade RUN --evalset EVALSET` opens, graded on groundedness alone.
    _, answers, _ = read_judged_answers(first_dir, TableStore(tmp_path / "store" / "assets").locate)
    judged = [a for a in answers if "groundedness" in a.judgments]
    assert len(judged) >= len(GRADES)
    items = [GradeItem(a, ("groundedness",)) for a in stratified_sample(judged, len(GRADES), seed=0)]
    questions = {q.id: q for q in load_evalset(evalset)}
    _type_grades(GradeSession(items, grades_path(evalset), first_dir.name, questions))
    typed = load_grades(grades_path(evalset))
    assert sorted(g.grade for g in typed.values()) == sorted(GRADES)

    assert main(["--config", str(config), "run"]) == 0
    progress = capsys.readouterr().err  # each run's outcome, as the terminal shows it
    assert "answer_grid_job" not in progress and "metrics_job: succeeded" in progress  # nothing answered again
    run = read_run(list_runs(tmp_path / "store" / "runs")[0])
    assert run.path != first_dir
    grounded = run.metrics["judges"]["judges"]["groundedness"]
    assert grounded["agreement"]["n"] == 5 and grounded["agreement"]["too_few"]
    (cell,) = grounded["cells"]
    assert cell["graded"] == 5 and cell["calibrated"] is not None
    row = next(line for line in run.summary.splitlines() if line.startswith("| groundedness | 5 |"))
    assert row.endswith("| undecided: 5 graded answer(s), fewer than 10 |")
    assert "- groundedness: Only 5 graded answer(s), fewer than 10: these figures say little about the judge." \
        in run.summary
    estimate = f"| 5 (< 10: not used by the gate) | {cell['calibrated']:.2f} |"
    assert estimate in run.summary
    page = (run.path / REPORT_FILE).read_text(encoding="utf-8")
    assert "<td>groundedness</td><td>5</td>" in page and f"<td>{cell['calibrated']:.2f}</td>" in page
    assert "Only 5 graded answer(s), fewer than 10" in page
