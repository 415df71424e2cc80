"""`rag-eval compare` with a grades file beside the configured evalset (issue 23): a pipeline run judged by a scripted
judge on loopback, graded in agreement with the judge (the cell is judged on its calibrated means) and against it (the
judge is not trusted: the calibrated means still decide, while a gate on the raw scores falls back to the retrieval
metric)."""

from __future__ import annotations

import json
from pathlib import Path

from rag_eval_assets.cli import main
from rag_eval_assets.judging.agreement import agreement
from rag_eval_assets.judging.grades import Grade, grades_path, save_grades
from rag_eval_assets.runs.store import read_run
from rag_eval_assets_tests.judged_runs import judged_run, sample_evalset


def test_compare_reads_the_grades_beside_the_evalset(tmp_path: Path, capsys) -> None:
    evalset = sample_evalset(tmp_path)
    config, run_dir = judged_run(tmp_path, "retrievers: [bm25]\nk_values: [3]\nanswering: {k_values: [3]}\n"
                                           "judge: {min_grades: 5}\n", evalset)
    run = read_run(run_dir)
    version = run.config["version_tuple"]["judge"]["prompt_version"]
    judged = [(row["query_id"], j["judge_input_sha256"], int(j["score"])) for row in run.results
              for j in row.get("judgments") or [] if j["judge"] == "correctness" and j.get("score") is not None]
    assert len(judged) >= 5
    out = tmp_path / "out"

    def compare(person, calibrated: str = "--calibrated") -> tuple[int, str, dict]:
        save_grades(grades_path(evalset), [Grade(q, "correctness", sha, person(score), version)
                                           for q, sha, score in judged])
        code = main(["compare", "--config", str(config), "--base", run.run_id, "--cand", run.run_id, "--out",
                     str(out), "--metric", "correctness", calibrated])
        return code, capsys.readouterr().out, json.loads((out / "comparison.json").read_text(encoding="utf-8"))

    # The person agrees with the judge: the cell is judged on the calibrated means, which rest on every grade.
    code, text, document = compare(lambda score: score)
    (cell,) = document["cells"]
    assert (code, cell["metric"], cell["estimate"], cell["n_graded_base"], cell["n_graded_cand"]) == (
        0, "correctness", "calibrated", len(judged), len(judged))
    assert (cell["delta"], cell["p_value"], cell["result"]) == (0.0, 1.0, "no significant change")
    assert document["gate"]["calibrated"] is True and document["judges"][0]["trusted"] is True
    n = cell["n_answers_base"]
    assert f"bm25@3: correctness calibrated by the person's grades: {cell['base']:.2f} -> {cell['cand']:.2f}, " \
           f"+0.00 [{cell['ci_low']:+.2f}, {cell['ci_high']:+.2f}], n {len(judged)} grades of {n} answers in the " \
           f"base run, {len(judged)} grades of {n} answers in the candidate" in text
    # A run against itself: the cell is identical in both runs, one line after the (empty) table, its note kept.
    markdown = (out / "comparison.md").read_text(encoding="utf-8")
    assert "_1 cell identical: bm25@3_\n\n- bm25@3: correctness calibrated by the person's grades" in markdown

    # The person contradicts the judge: not trusted, which changes nothing where the grades decide ...
    code, text, document = compare(lambda score: 5 - score)
    kappa = agreement([s for _, _, s in judged], [5 - s for _, _, s in judged]).kappa
    (cell,) = document["cells"]
    assert kappa < 0.4 and document["judges"][0]["trusted"] is False
    assert (code, cell["metric"], cell["estimate"], cell["skipped"]) == (0, "correctness", "calibrated", [])
    # ... while on the raw judge scores the cell goes to the retrieval metric.
    code, text, document = compare(lambda score: 5 - score, "--no-calibrated")
    (cell,) = document["cells"]
    assert (code, cell["metric"], cell["estimate"]) == (0, "ndcg@k", "paired")
    assert [(s["metric"], s["n"]) for s in cell["skipped"]] == [("correctness", len(judged))]
    assert (f"bm25@3: correctness not used, its judge is not trusted: kappa {kappa:.2f} < 0.4, the judge agrees too "
            f"little with the person ({len(judged)} grades); judged on ndcg@k") in text
