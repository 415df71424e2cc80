"""A judged run over the sample data (a scripted judge on loopback), then grades written by the real grades writer:
the next run makes the run directory again, with the agreement and the calibrated estimate in metrics.json,
summary.md and report.html, without answering or judging anything again; then a spot-check run re-judges N answers
and reports the judge's self-consistency beside the agreement."""

from __future__ import annotations

import html
import json
from pathlib import Path

import dagster as dg
import pytest

from rag_eval_assets.definitions import build_defs
from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.generation.settings import spot_check
from rag_eval_assets.judging.agreement import agreement
from rag_eval_assets.judging.calibration import calibrated_mean, within_scale
from rag_eval_assets.judging.grades import Grade, grades_path, save_grades
from rag_eval_assets.reports.html import REPORT_FILE
from rag_eval_assets.reports.judges import MEANS_EXPLAINED
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.store import read_run
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.judged_runs import sample_evalset, scripted_judge
from rag_eval_assets_tests.llm_fault_server import llm_fault_server
from rag_eval_assets_tests.sample_config import write_sample_config

ONE_CELL = "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\n"


def _materialized(steps) -> set[str]:
    return {e.asset_key.to_user_string() for s in steps for e in s.result.get_asset_materialization_events()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("judges")
    evalset = sample_evalset(directory)
    out = {}
    with llm_fault_server(responder=scripted_judge) as server:
        config = write_sample_config(directory, ONE_CELL + f"llm: {{base_url: '{server.base_url}', model: judge-m}}\n",
                                     evalset=evalset)
        (directory / "home").mkdir()
        with dg.instance_for_test(temp_dir=str(directory / "home")) as instance:

            def pipeline(overrides=None):
                before = len(server.requests)
                steps = list(run_pipeline(build_defs(config, overrides), load_settings(config, overrides), instance))
                assert [s.job for s in steps if not s.result.success] == []
                return steps, len(server.requests) - before, list_runs(directory / "store" / "runs")[0]

            out["first"] = pipeline()
            first = read_run(out["first"][2])
            main = first.judgment_frame()
            grounded = main[(main["judge"] == "groundedness") & main["score"].notna()].head(4)
            # Three of the four the same as the judge, one a point apart (towards the middle of the scale).
            grades = [int(s) for s in grounded["score"]]
            grades[3] += 1 if grades[3] < 3 else -1
            save_grades(grades_path(evalset), [
                Grade(q, "groundedness", sha, g, "v1", run_id=first.run_id)
                for q, sha, g in zip(grounded["query_id"], grounded["judge_input_sha256"], grades)])
            out["grades"] = (list(grounded["score"]), grades)
            out["graded"] = pipeline()
            out["spot"] = pipeline(spot_check(4))
    return out


def test_grades_make_the_report_again_with_agreement_and_calibrated_estimate_without_judging_again(runs) -> None:
    first_steps, first_calls, first_dir = runs["first"]
    assert first_calls > 0
    first = read_run(first_dir).metrics["judges"]
    assert first["note"] == "no grades yet: rag-eval label --grade RUN" and first["judges"]["groundedness"]["agreement"] \
        is None

    steps, calls, run_dir = runs["graded"]
    assert run_dir != first_dir and calls == 0  # no answer, no judgement: the grades file alone changed
    assert {s.job for s in steps} == {"metrics_job"}
    assert _materialized(steps) == {"grades_file", "evaluation_run", "run_comparison"}

    run = read_run(run_dir)
    scores, grades = runs["grades"]
    expected = agreement(scores, grades)
    section = run.metrics["judges"]
    grounded = section["judges"]["groundedness"]
    a = grounded["agreement"]
    assert (a["n"], a["exact"], a["within_one"]) == (4, 0.75, 1.0) and a["too_few"]
    assert a["kappa"] == pytest.approx(expected.kappa) and a["mean_bias"] == pytest.approx(expected.mean_bias)
    assert grounded["trust"] == "undecided: 4 graded answer(s), fewer than 10"
    assert section["judges"]["correctness"]["agreement"] is None
    (cell,) = grounded["cells"]
    frame = run.judgment_frame()
    cell_scores = frame[(frame["judge"] == "groundedness") & frame["score"].notna()]
    by_sha = dict(zip(cell_scores["judge_input_sha256"].head(4), grades))
    y = [by_sha.get(sha, float("nan")) for sha in cell_scores["judge_input_sha256"]]
    # Shown cut to the 0-5 scale (judging/summary.py).
    calibrated = within_scale(calibrated_mean(cell_scores["score"].to_numpy(), y), 0, 5)
    assert (cell["graded"], cell["answers"]) == (4, len(cell_scores))
    assert cell["calibrated"] == pytest.approx(calibrated.estimate)
    assert (cell["calibrated_low"], cell["calibrated_high"]) == pytest.approx((calibrated.low, calibrated.high))

    summary = run.summary
    assert "## Can the judge be trusted?" in summary
    assert "- groundedness: Only 4 graded answer(s), fewer than 10: these figures say little about the judge." \
        in summary
    assert (f"| groundedness | 4 | 75% | 100% | {expected.kappa:.2f} | {expected.spearman:.2f} | "
            f"{expected.mean_bias:+.2f} | undecided: 4 graded answer(s), fewer than 10 |") in summary
    assert (f"| 4 (< 10: not used by the gate) | {calibrated.estimate:.2f} | "
            f"[{calibrated.low:.2f}, {calibrated.high:.2f}], n 4 grades of {cell['answers']} answers |") in summary
    assert MEANS_EXPLAINED in summary
    page = (run_dir / REPORT_FILE).read_text(encoding="utf-8")
    assert '<section id="judges"><h2>Can the judge be trusted?</h2>' in page
    assert (f"<td>{calibrated.estimate:.2f}</td><td>[{calibrated.low:.2f}, {calibrated.high:.2f}], n 4 grades of "
            f"{cell['answers']} answers</td>") in page
    assert "fewer than 10: these figures say little about the judge" in page
    assert html.escape(MEANS_EXPLAINED) in page
    event = _metadata(steps)
    assert "Only 4 graded answer(s)" in event


def test_a_spot_check_re_judges_n_answers_and_reports_self_consistency(runs) -> None:
    steps, calls, run_dir = runs["spot"]
    # Four answers judged once more by both judges; the first judgements come from the call cache.
    assert calls == 8
    run = read_run(run_dir)
    assert run.config["version_tuple"]["judge"] == {"model": "judge-m", "prompt_version": "v1", "temperature": 0.0,
                                                    "replicates": 1, "replicate_sample": 4}
    for judge in ("groundedness", "correctness"):
        # The scripted judge scores by its input: the same input, the same score.
        assert run.metrics["judges"]["judges"][judge]["self_consistency"] == {
            "pairs": 4, "exact_agreement": 1.0, "mean_abs_diff": 0.0}
    assert "### Agreement with itself (spot-check)" in run.summary
    assert "| groundedness | 4 | 100% | 0.00 |" in run.summary
    # Beside the agreement, which the grades still give.
    assert run.metrics["judges"]["judges"]["groundedness"]["agreement"]["n"] == 4
    assert "<h3>Agreement with itself (spot-check)</h3>" in (run_dir / REPORT_FILE).read_text(encoding="utf-8")
    assert "| groundedness | 4 | 100% | 0.00 |" in _metadata(steps)


def _metadata(steps) -> str:
    (event,) = [e for s in steps for e in s.result.get_asset_materialization_events()
                if e.asset_key.to_user_string() == "evaluation_run"]
    return json.dumps(str(event.materialization.metadata["judges"].value))


def test_no_grades_file_is_said_in_every_report(runs) -> None:
    run = read_run(runs["first"][2])
    assert "- no grades yet: rag-eval label --grade RUN (grades go to " in run.summary
    assert "no grades yet: rag-eval label --grade RUN" in (run.path / REPORT_FILE).read_text(encoding="utf-8")
    assert Path(run.metrics["judges"]["grades_file"]).name == "eval_set.jsonl.grades.jsonl"


def test_spot_check_takes_a_positive_number_of_answers(capsys) -> None:
    from rag_eval_assets.cli import build_parser

    assert build_parser().parse_args(["run", "--spot-check", "7"]).spot_check == 7
    assert build_parser().parse_args(["evaluate", "--corpus", "c", "--evalset", "e", "--out", "o",
                                      "--spot-check", "3"]).spot_check == 3
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["run", "--spot-check", "0"])
    assert refused.value.code == 2 and "--spot-check: must be at least 1, got 0" in capsys.readouterr().err
    assert spot_check(7) == {"judge": {"replicates": 1, "replicate_sample": 7}}
