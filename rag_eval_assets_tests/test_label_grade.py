"""`rag-eval label --grade`: a person grades the judged answers of a real run (the whole pipeline over the sample
data, a scripted judge on loopback) in the Textual app, driven by the headless pilot."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.generation.judges import judge_input_sha256
from rag_eval_assets.judging.graded import GRADED_COLUMNS, with_grades
from rag_eval_assets.judging.grades import grades_path, load_grades
from rag_eval_assets.labeling.grade_app import HIDDEN, KEYS, GradeApp
from rag_eval_assets.labeling.grade_session import GradeItem, GradeSession
from rag_eval_assets.labeling.judged_run import (
    JudgedAnswer,
    disagreements,
    read_judged_answers,
    resolve_run,
    stratified_sample,
)
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.runs.contents import judged_table_frame
from rag_eval_assets.runs.judge_inputs import JUDGE_INPUTS_FILE
from rag_eval_assets.runs.store import read_run
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.judged_runs import TWO_RETRIEVERS, judged_run, sample_evalset
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table

CELLS = [("bm25", 3), ("bm25", 5), ("bm25_tuned", 3), ("bm25_tuned", 5)]


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory):
    """Two retrievers x k 3 and 5, texts cut in results.jsonl as by default; the extractive answerer answers the
    unanswerable test_009 too (a threshold below its best overlap), so that its answer is judged and graded."""
    directory = tmp_path_factory.mktemp("first")
    evalset = sample_evalset(directory)
    config, run_dir = judged_run(directory, TWO_RETRIEVERS + "k_values: [3, 5]\n"
                                 "answering: {k_values: [3, 5], extractive_threshold: 0.01}\n", evalset)
    return config, run_dir, directory / "store" / "assets"


@pytest.fixture
def evalset(tmp_path: Path) -> Path:
    return sample_evalset(tmp_path)


def _answers(first) -> list[JudgedAnswer]:
    _, run_dir, assets = first
    return read_judged_answers(run_dir, TableStore(assets).locate)[1]


def graded_pairs(judged: pd.DataFrame, grades: Path) -> pd.DataFrame:
    """The judged table's main judgements that a grade applies to, as the report and the gate match them."""
    pairs = with_grades(judged_table_frame(judged), load_grades(grades))
    return pairs[pairs["grade"].notna()]


def _judged_table(assets: Path) -> pd.DataFrame:
    return pd.concat([stored_table(assets, f"judged_answers/retriever={r}/k={k}") for r, k in CELLS],
                     ignore_index=True)


def _session(first, evalset: Path, answers: list[JudgedAnswer]) -> GradeSession:
    questions = {q.id: q for q in load_evalset(evalset)}
    return GradeSession([GradeItem(a, tuple(a.judgments)) for a in answers], grades_path(evalset),
                        first[1].name, questions)


def _run(app: GradeApp, *keys: str, statuses: list[str] | None = None) -> list[str]:
    """Press `keys`; the grading panel's text after each (and the status line's into `statuses`)."""
    panels = []
    statuses = [] if statuses is None else statuses

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            panels.append(str(app.query_one("#grading").render()))
            statuses.append(str(app.query_one("#status").render()))
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
                panels.append(str(app.query_one("#grading").render()))
                statuses.append(str(app.query_one("#status").render()))

    asyncio.run(drive())
    return panels


def test_the_run_offers_its_judged_answers_with_their_whole_judge_inputs(first) -> None:
    _, run_dir, assets = first
    run, answers, notes = read_judged_answers(run_dir, TableStore(assets).locate)
    table = _judged_table(assets)
    main_scored = table[(table["replicate"] == 0) & table["score"].notna()]
    # Every scored judgement of the run, with the judge input the judge really got (the table's, not the cut one).
    assert sum(len(a.judgments) for a in answers) == len(main_scored) > 0
    whole = main_scored.set_index(["query_id", "retriever", "k", "judge"])["judge_input"]
    for a in answers:
        for judge, j in a.judgments.items():
            assert j.judge_input == whole[(a.query_id, a.retriever, a.k, judge)]
    assert max(len(j.user_message()) for a in answers for j in a.judgments.values()) > 200
    assert notes == [f"judge inputs from {run_dir / JUDGE_INPUTS_FILE} (kept with the run)"]
    # What the judge saw, read back through its prompt: the evalset's question and reference, the answer.
    q1 = next(a for a in answers if a.query_id == "test_001" and a.cell == ("bm25", 3))
    fields = q1.judgments["correctness"].fields()
    assert fields["question"] == "What are the wind limits for opening the Aquila dome?"
    # The sample evalset is seed 002's: the correctness judge's reference is the key facts.
    assert fields["reference"] == "; ".join(load_evalset(run_dir.parents[2] / "eval_set.jsonl")[0].expected_key_facts)
    assert fields["contexts"].startswith("[1] (notes/Operations/Night Shift.md")
    answer_row = next(r for r in run.results if (r["query_id"], r["retriever"], r["k"]) == ("test_001", "bm25", 3))
    assert fields["answer"].startswith(answer_row["answer"]["text"].rstrip("…"))


def test_grading_hides_then_shows_the_judge_score_and_saves_each_grade(first, evalset: Path) -> None:
    answers = stratified_sample(_answers(first), 4, seed=1)
    session = _session(first, evalset, answers)
    shown = answers[0]
    grounded, correct = shown.judgments["groundedness"], shown.judgments["correctness"]
    app = GradeApp(session)
    panels = _run(app, "3", "9", "5")

    before, after_one, refused, after_two = panels
    assert before.count(HIDDEN) == 2 and "▶ groundedness" in before
    assert "your grade 3" in after_one and f"judge {grounded.score:g}" in after_one and after_one.count(HIDDEN) == 1
    assert "▶ correctness" in after_one  # on to the metric still to grade
    assert refused == after_one  # 9 is off the 0-5 scale: nothing graded
    assert f"judge {correct.score:g}" in after_two and HIDDEN not in after_two
    path = grades_path(evalset)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    table = _judged_table(first[2]).set_index(["query_id", "retriever", "k", "judge"])
    expected = []
    for judge, value in (("correctness", 5), ("groundedness", 3)):
        row = table.loc[(shown.query_id, shown.retriever, shown.k, judge)]
        expected.append({"query_id": shown.query_id, "judge": judge,
                         "judge_input_sha256": judge_input_sha256(row["judge_input"]), "grade": value,
                         "judge_prompt_version": "v1", "judge_model": "judge-m", "judge_score": row["score"],
                         "run_id": first[1].name, "retriever": shown.retriever, "k": shown.k})
    assert [{k: v for k, v in line.items() if k != "graded_at"} for line in lines] == expected
    assert all(line["graded_at"].endswith("Z") for line in lines)
    assert session.backup is None  # there was no file to back up
    assert list(path.parent.glob(".*.tmp")) == []


def test_a_grade_moves_on_only_while_advance_is_on_and_the_count_is_of_grades_written(first, evalset: Path) -> None:
    answers = stratified_sample(_answers(first), 2, seed=3)
    session = _session(first, evalset, answers)
    app = GradeApp(session)
    # a: stay on the metric after a grade; grading groundedness twice rewrites one line; a again, then s skips.
    statuses = []
    panels = _run(app, "a", "2", "4", "a", "1", "s", statuses=statuses)
    assert "▶ groundedness" in panels[2] and "your grade 2" in panels[2]
    assert "▶ groundedness" in panels[3] and "your grade 4" in panels[3]  # stayed, graded again
    assert "▶ correctness" in panels[5]  # advance is on again: moved on after grading groundedness 1
    assert session.index == 1 and session.grade_of("groundedness") is None  # s: the next answer, nothing graded
    lines = grades_path(evalset).read_text(encoding="utf-8").splitlines()
    assert session.saved == len(lines) == 1 and json.loads(lines[0])["grade"] == 1
    # The half-graded answer skipped: not graded, counted as skipped; back on it, the status line says so.
    assert (session.skipped, session.graded) == ({0}, 0) and "graded 0   skipped 1" in statuses[6]
    assert "(skipped)" not in statuses[6]
    session.move(-1)
    assert session.is_skipped
    assert "a           after a grade: select the next metric, or stay" in KEYS
    assert "s           skip this answer" in KEYS and "not counted as graded" in KEYS


def test_a_skipped_answer_graded_later_is_no_longer_skipped_and_a_skip_is_not_kept(first, evalset: Path) -> None:
    answers = stratified_sample(_answers(first), 3, seed=2)
    session = _session(first, evalset, answers)
    statuses = []
    # Skip the first two, go back to the second and grade it fully; skip the third, the last.
    _run(GradeApp(session), "s", "s", "p", "3", "4", "n", "s", statuses=statuses)
    assert "1 / 3" not in statuses[2] and "(skipped)" in statuses[3] and "skipped 2" in statuses[3]
    assert "skipped 1" in statuses[5] and "(skipped)" not in statuses[5]  # graded: the mark is cleared
    assert (session.skipped, session.graded, session.saved) == ({0, 2}, 1, 2)
    assert len(load_grades(grades_path(evalset))) == 2  # a skip writes nothing
    session.move(1 - session.index)  # s on a graded answer moves on and marks nothing
    assert (session.skip(), session.index, session.skipped) == (None, 2, {0, 2})
    # The next session knows no skip: it opens on the first answer still to grade, the first one skipped.
    again = _session(first, evalset, answers)
    assert (again.index, again.skipped, again.graded) == (0, set(), 1)


def test_an_unanswerable_question_draws_each_line_once(first, evalset: Path) -> None:
    (unanswerable,) = [a for a in _answers(first) if a.query_id == "test_009" and a.cell == ("bm25", 3)]
    session = _session(first, evalset, [unanswerable])
    app = GradeApp(session)

    async def drive() -> tuple[str, str]:
        async with app.run_test(size=(120, 200)) as pilot:
            await pilot.pause()
            return _screen_text(app), str(app.query_one("#answer").render())

    drawn, answer = asyncio.run(drive())
    screen = [line.rstrip() for line in drawn.splitlines() if line.strip()]
    assert "unanswerable: the corpus does not hold the answer" in "\n".join(screen)
    assert any("What is the boiling point of liquid nitrogen" in line for line in screen)
    # Every line of text on the screen once; contexts may repeat lines of their own (a table's rule), so the
    # lines compared are those outside the context section and the answer that quotes it.
    body = answer.split("\n\n")
    assert [section.split("\n")[0] for section in body if section][:2] == ["question", "gold"]
    shown = [line for line in screen if not line.lstrip("▶ ").startswith(("[", "|", "#"))]
    repeated = sorted({line for line in shown if shown.count(line) > 1})
    assert repeated == []


def test_a_second_session_resumes_backs_up_first_and_a_failed_write_keeps_the_file(first, evalset: Path,
                                                                                    monkeypatch) -> None:
    answers = stratified_sample(_answers(first), 4, seed=1)
    _run(GradeApp(_session(first, evalset, answers)), "2", "2", "n", "1")
    path = grades_path(evalset)
    written = path.read_bytes()

    # The next session over the same sample opens on the answer still half graded, on its ungraded metric.
    session = _session(first, evalset, answers)
    assert (session.index, session.judge) == (1, "correctness")
    assert session.graded == 1
    app = GradeApp(session)
    _run(app, "4")
    assert session.backup is not None and session.backup.read_bytes() == written
    assert len(load_grades(path)) == 4

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    # A write that fails part-way leaves the file as it was and no temporary file; the app says so.
    before = path.read_bytes()
    monkeypatch.setattr(os, "fsync", broken_fsync)
    session = _session(first, evalset, answers)
    app = GradeApp(session)

    async def drive() -> str:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("5")
            await pilot.pause()
            return str(app.query_one("#message").render())

    message = asyncio.run(drive())
    assert message.startswith("NOT saved:") and "No space left on device" in message
    assert path.read_bytes() == before and list(path.parent.glob(".*.tmp")) == []
    assert session.grade_of(session.judge) is None


def test_the_sample_is_stratified_over_retriever_and_k_and_reproducible(first) -> None:
    answers = _answers(first)
    sample = stratified_sample(answers, 8, seed=3)
    cells = [a.cell for a in sample]
    assert {cell: cells.count(cell) for cell in CELLS} == {cell: 2 for cell in CELLS}
    assert cells[:4] == CELLS  # one per cell in turn: a half-finished pass still covers every cell
    again = stratified_sample(answers, 8, seed=3)
    assert [(a.query_id, a.cell) for a in again] == [(a.query_id, a.cell) for a in sample]
    other = stratified_sample(answers, 8, seed=4)
    assert [(a.query_id, a.cell) for a in other] != [(a.query_id, a.cell) for a in sample]
    assert len(stratified_sample(answers, 1000, seed=3)) == len(answers)


def test_only_disagreements_picks_grades_more_than_one_point_off(first, evalset: Path) -> None:
    answers = _answers(first)
    by_score = {}
    for a in answers:
        by_score.setdefault(a.judgments["correctness"].score, a)
    low, high = by_score[0.0], by_score[5.0]
    session = _session(first, evalset, [low, high])
    # low: correctness 2 (two off the judge's 0: a disagreement), groundedness exactly the judge's;
    # high: correctness 4 (one off the judge's 5: agreement within one), groundedness two off.
    high_grounded = high.judgments["groundedness"].score
    off_by_two = int(high_grounded - 2 if high_grounded >= 2 else high_grounded + 2)
    keys = [str(int(low.judgments["groundedness"].score)), "2", "n", str(off_by_two), "4"]
    _run(GradeApp(session), *keys)

    found = disagreements(answers, load_grades(grades_path(evalset)))
    # Every answer whose judge saw one of the two disagreeing inputs, in whichever cell.
    off = {("correctness", low.judgments["correctness"].sha256),
           ("groundedness", high.judgments["groundedness"].sha256)}
    expected = [(a.query_id, a.cell, tuple(judge for judge, j in a.judgments.items() if (judge, j.sha256) in off))
                for a in answers if any((judge, j.sha256) in off for judge, j in a.judgments.items())]
    assert [(a.query_id, a.cell, judges) for a, judges in found] == expected
    assert (low.query_id, low.cell, ("correctness",)) in expected
    assert (high.query_id, high.cell, ("groundedness",)) in expected
    # Shown again, a disagreement already has its grade, so the judge's score is in view from the start.
    again = GradeSession([GradeItem(a, judges) for a, judges in found], grades_path(evalset), first[1].name)
    (panel,) = _run(GradeApp(again))
    (judge,) = found[0][1]
    grade, score = (2, 0) if judge == "correctness" else (off_by_two, int(high_grounded))
    other = "groundedness" if judge == "correctness" else "correctness"
    assert HIDDEN not in panel and f"your grade {grade}" in panel and f"judge {score}" in panel
    assert f"{other} (" not in panel  # only the metric that disagrees is offered


def test_a_grade_is_matched_in_every_cell_and_later_run_with_the_same_judge_input_only(first, evalset, tmp_path):
    answers = _answers(first)
    # test_001 gets the same three chunks from both retrievers at k 3: one judge input, graded once, two cells.
    q1 = next(a for a in answers if a.query_id == "test_001" and a.cell == ("bm25", 3))
    q1_tuned = next(a for a in answers if a.query_id == "test_001" and a.cell == ("bm25_tuned", 3))
    assert q1.judgments["correctness"].sha256 == q1_tuned.judgments["correctness"].sha256
    q2 = next(a for a in answers if a.query_id == "test_002" and a.cell == ("bm25", 3))
    _run(GradeApp(_session(first, evalset, [q1, q2])), "1", "2", "n", "3", "4")
    grades = grades_path(evalset)

    pairs = graded_pairs(_judged_table(first[2]), grades)
    assert tuple(pairs.columns) == GRADED_COLUMNS
    graded = {(r.judge, r.retriever, r.k, r.query_id): (r.score, r.grade) for r in pairs.itertuples()}
    expected = {}
    for a, (grounded, correct) in ((q1, (1, 2)), (q2, (3, 4))):
        for other in answers:
            for judge, value in (("groundedness", grounded), ("correctness", correct)):
                if other.query_id == a.query_id and judge in other.judgments and \
                        other.judgments[judge].sha256 == a.judgments[judge].sha256:
                    expected[(judge, other.retriever, other.k, a.query_id)] = (other.judgments[judge].score, value)
    assert graded == expected and ("correctness", "bm25_tuned", 3, "test_001") in graded

    # A later run, texts kept whole in its run directory, with test_002's question reworded: its answer and
    # context change, test_001's do not.
    later_dir = tmp_path / "later"
    later_dir.mkdir()
    lines = [json.loads(line) for line in evalset.read_text(encoding="utf-8").splitlines()]
    for record in lines:
        if record["id"] == "test_002":
            record["question"] = "Once the dome was closed for humidity, how long must humidity stay low to reopen it?"
    later_evalset = later_dir / "eval_set.jsonl"
    later_evalset.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    _, later_run = judged_run(later_dir, "retrievers: [bm25]\nk_values: [3]\n"
                                         "answering: {k_values: [3], extractive_threshold: 0.01}\n"
                                         "report: {store_full_text: true}\n", later_evalset)
    _, later_answers, notes = read_judged_answers(later_run, None)
    assert notes == [f"judge inputs from {later_run / JUDGE_INPUTS_FILE} (kept with the run)"]
    # A run written before judge_inputs.jsonl with its texts whole: the same inputs from results.jsonl.
    (later_run / JUDGE_INPUTS_FILE).rename(later_dir / JUDGE_INPUTS_FILE)
    _, from_results, notes = read_judged_answers(later_run, None)
    (later_dir / JUDGE_INPUTS_FILE).rename(later_run / JUDGE_INPUTS_FILE)
    assert notes == [f"judge inputs from {later_run / 'results.jsonl'} (the run kept its texts whole)"]
    assert from_results == later_answers
    later_pairs = graded_pairs(stored_table(later_dir / "store" / "assets", "judged_answers/retriever=bm25/k=3"),
                               grades)
    assert sorted(zip(later_pairs["query_id"], later_pairs["judge"], later_pairs["grade"])) == [
        ("test_001", "correctness", 2), ("test_001", "groundedness", 1)]
    later_session = GradeSession([GradeItem(a, tuple(a.judgments)) for a in later_answers], grades, later_run.name)
    shown = {a.query_id: n for n, a in enumerate(later_answers)}
    later_session.move(shown["test_001"] - later_session.index)
    assert (later_session.grade_of("groundedness"), later_session.grade_of("correctness")) == (1, 2)
    assert "test_002" in shown  # still answered and judged, on another input
    later_session.move(shown["test_002"] - later_session.index)
    assert (later_session.grade_of("groundedness"), later_session.grade_of("correctness")) == (None, None)


def test_bad_input_names_the_file_the_line_and_the_field(first, evalset: Path, tmp_path: Path, capsys) -> None:
    _, run_dir, assets = first
    # The command grades the configured evalset only: a configuration naming this test's copy.
    config = write_sample_config(tmp_path, "retrievers: [bm25]\n", evalset=evalset)
    with pytest.raises(InputError) as missing:
        resolve_run("20990101_000000", run_dir.parent)
    assert f"20990101_000000: no such run: neither a directory nor a run id in {run_dir.parent}" in str(missing.value)
    # Through the command line: the same words, exit 2.
    assert main(["label", "--config", str(config), "--evalset", str(evalset), "--grade", "20990101_000000"]) == 2
    assert "no such run" in capsys.readouterr().err

    # A run written by the real writer with its answers unjudged.
    run = read_run(run_dir)
    unjudged = write_run(tmp_path / "runs", results=[{**row, "judgments": []} for row in run.results],
                         metrics=run.metrics, config=run.config)
    with pytest.raises(InputError) as not_judged:
        read_judged_answers(unjudged, TableStore(assets).locate)
    assert f"{unjudged / 'results.jsonl'}: field 'judgments': no judgment with a score" in str(not_judged.value)
    assert "it ran without llm, or with judge.enabled false" in str(not_judged.value)
    # A run whose every judge call failed says so, with the first error, not that it was never judged.
    failing = [{**row, "judgments": [{"judge": "correctness", "replicate": 0, "score": None,
                                      "error": "ConnectError: [Errno 111] Connection refused"}]} for row in run.results]
    failed = write_run(tmp_path / "runs", results=failing, metrics=run.metrics, config=run.config)
    with pytest.raises(InputError) as all_failed:
        read_judged_answers(failed, TableStore(assets).locate)
    assert (f"every judge call of this run failed ({len(failing)} judgement(s) with an error; the first: "
            "ConnectError: [Errno 111] Connection refused)") in str(all_failed.value)

    # A grades file with a bad grade, a line that is not JSON and a missing key.
    answers = stratified_sample(_answers(first), 1, seed=0)
    _run(GradeApp(_session(first, evalset, answers)), "3")
    path = grades_path(evalset)
    good = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({**good, "judge": "correctness", "grade": 7}) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({k: v for k, v in good.items() if k != "judge_input_sha256"}) + "\n")
    with pytest.raises(InputError) as corrupt:
        load_grades(path)
    assert [str(p) for p in corrupt.value.problems] == [
        f"{path}:2: field 'grade': expected an integer 0-5, got 7",
        f"{path}:3: invalid JSON: Expecting property name enclosed in double quotes",
        f"{path}:4: field 'judge_input_sha256': missing or not 64 lowercase hex digits",
    ]
    assert main(["label", "--config", str(config), "--evalset", str(evalset), "--grade", str(run_dir)]) == 2
    assert f"{path}:2: field 'grade'" in capsys.readouterr().err


def test_grades_go_only_beside_the_configured_evalset(first, evalset: Path, capsys) -> None:
    config, run_dir, _ = first
    configured = load_settings(config).evalset.path
    assert main(["label", "--config", str(config), "--evalset", str(evalset), "--grade", str(run_dir)]) == 2
    assert capsys.readouterr().err == (
        f"error: --evalset {evalset} is not the configured evalset {configured} (evalset.path of {config}): its "
        f"grades would land where the pipeline never reads them; give --evalset {configured}\n")
    assert not grades_path(evalset).exists()


def _screen_text(app: GradeApp) -> str:
    """The screen as drawn, line by line: what a person sees, overlaps and all (Textual's compositor, as its own
    snapshot tests read it)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())
