"""`rag-eval compare`: the verdict first, comparison.json, exit codes 0, 1, 2 and 3; `rag-eval history`."""

import json

from rag_eval_assets.cli import main
from rag_eval_assets_tests.test_verdict_compare import BASE, config, crafted_run, hits


def _compare(base, cand, out, *extra: str) -> int:
    return main(["compare", "--base", str(base.path), "--cand", str(cand.path), "--out", str(out), *extra])


def test_exit_codes_and_comparison_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no rag_eval.yaml here: the gate's own defaults
    runs = tmp_path / "runs"
    base = crafted_run(runs, "base", {("bm25", 5): hits(BASE)})
    same = crafted_run(runs, "same", {("bm25", 5): hits(BASE)})
    noise = crafted_run(runs, "noise", {("bm25", 5): hits(BASE - {0, 1, 2})})
    worse = crafted_run(runs, "worse", {("bm25", 5): hits(BASE - set(range(15)))})
    other_evalset = crafted_run(runs, "other", {("bm25", 5): hits(BASE)}, cfg=config(evalset="f" * 64))
    out = tmp_path / "out"

    assert _compare(base, same, out) == 0
    assert capsys.readouterr().out.startswith("Verdict: NO SIGNIFICANT CHANGE (exit 0)")
    # 3 of 60 lost (p ~ 0.25) is noise: no significant change, even with max_regressions 0.
    assert _compare(base, noise, out, "--max-regressions", "0") == 0
    # ... unless every change counts.
    assert _compare(base, noise, out, "--max-regressions", "0", "--no-significant-only") == 1
    capsys.readouterr()
    assert _compare(base, worse, out, "--max-regressions", "0") == 1
    text = capsys.readouterr().out
    assert text.startswith("Verdict: WORSE (exit 1): candidate worse against base base; decided by bm25@5 ndcg@k")
    assert "Top regressions (15 in the significant cells, 15 of them flips; 15 across all cells)" in text
    # The deciding cell's questions come first, then the regressions across the counted cells.
    evidence = [line.split() for line in text.splitlines() if line.startswith("  q0")]
    assert [r[:4] for r in evidence[:2]] == [["q000", "1.0000", "0.0000", "-1.0000"], ["q001", "1.0000", "0.0000",
                                                                                      "-1.0000"]]
    rows = [line.split() for line in text.splitlines() if line.startswith("  bm25@5  ndcg@k  q0")]
    assert [r[:6] for r in rows[:3]] == [["bm25@5", "ndcg@k", q, "1.000", "->", "0.000"]
                                         for q in ("q000", "q001", "q002")]
    document = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    assert (document["verdict"], document["base_run_id"], document["cand_run_id"]) == ("worse", "base", "worse")
    assert document["gate"]["max_regressions"] == 0 and document["cells"][0]["regressions"] == 15
    assert (out / "comparison.md").read_text(encoding="utf-8").startswith("**Verdict: WORSE (exit 1)")

    # One cell in full; a cell the gate did not judge is refused, naming those it did.
    assert _compare(base, worse, out, "--explain", "bm25@5", "--top-questions", "3") == 1
    text = capsys.readouterr().out
    assert text.startswith("Verdict: WORSE (exit 1)") and "Top regressions" not in text
    assert "bm25@5 ndcg@k (worse): 15 questions down (15 success → failure), 0 up" in text
    # The question table, then each question with its (here empty) lists.
    assert [line for line in text.splitlines() if line.startswith("  q0") and ": " in line] == [
        f"  q00{i}: Question q00{i}?" for i in range(3)]
    # A cell where no question moved says so, with no empty table.
    assert _compare(base, same, out, "--explain", "bm25@5") == 0
    text = capsys.readouterr().out
    assert "bm25@5 ndcg@k (no significant change): 0 questions down (0 success → failure), 0 up (0 failure → " \
           "success); no question moved" in text and "query_id" not in text
    assert _compare(base, worse, out, "--explain", "dense@5") == 2
    assert "error: --explain dense@5: no judged cell dense@5; the cells are bm25@5" in capsys.readouterr().err

    assert _compare(base, other_evalset, out) == 2
    text = capsys.readouterr().out
    assert text.startswith("Verdict: INCOMPATIBLE (exit 2)") and "e" * 12 in text and "f" * 12 in text
    assert _compare(base, other_evalset, out, "--ignore-invariants") == 0

    # A run directory that is not there, or not a run, has its own message and exit code.
    assert main(["compare", "--base", str(runs / "nope"), "--cand", str(same.path), "--out", str(out)]) == 3
    assert "error: the base run " in capsys.readouterr().err
    (runs / "broken").mkdir()
    (runs / "broken" / "metrics.json").write_text("{", encoding="utf-8")
    assert main(["compare", "--base", str(base.path), "--cand", str(runs / "broken"), "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "the candidate run" in err and "metrics.json" in err and "invalid JSON" in err


def test_the_gate_settings_come_from_the_configuration_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    (tmp_path / "rag_eval.yaml").write_text(
        "corpus: {id: c, path: corpus}\nevalset: {name: e, path: e.jsonl}\nruns_dir: runs\n"
        "report:\n  gate: {significant_only: false, max_regressions: 0}\n", encoding="utf-8")
    base = crafted_run(runs, "base", {("bm25", 5): hits(BASE)})
    cand = crafted_run(runs, "noise", {("bm25", 5): hits(BASE - {0})})
    # Run ids resolve in the configured store; the file's strict gate fails a single lost question ...
    assert main(["compare", "--base", "base", "--cand", "noise", "--out", "out"]) == 1
    # ... and a flag overrides it.
    assert main(["compare", "--base", "base", "--cand", "noise", "--out", "out", "--significant-only"]) == 0
    assert json.loads((tmp_path / "out" / "comparison.json").read_text())["gate"]["significant_only"] is True
    assert (base.run_id, cand.run_id) == ("base", "noise")


def test_history_lists_runs_newest_first_with_their_verdicts(tmp_path, capsys):
    runs = tmp_path / "runs"
    from rag_eval_assets.reports.run_directory import write_run
    from rag_eval_assets.runs.store import read_run

    first = crafted_run(runs, "20260101_000000", {("bm25", 10): hits(BASE), ("dense", 10): hits(BASE)})
    rows = [{**r, "metrics": {"ndcg@k": 0.0}} if r["retriever"] == "bm25" else r for r in first.results]
    metrics = {**first.metrics, "aggregate": [
        {**a, "value": 0.0} if a["retriever"] == "bm25" else a for a in first.metrics["aggregate"]]}
    second = read_run(write_run(runs, results=rows, metrics=metrics, config=first.config, previous=first.path,
                                run_id="20260102_000000"))
    assert second.comparison["verdict"] == "worse"
    assert main(["history", "--runs-dir", str(runs), "--metric", "ndcg@10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["run_id", "created_at", "eval_set_version", "bm25", "ndcg@10", "dense", "ndcg@10",
                                "verdict"]
    assert lines[2].split()[0] == "20260102_000000" and lines[2].split()[3:6] == ["0.0000", "0.6667", "worse"]
    assert lines[3].split()[0] == "20260101_000000" and lines[3].split()[3:] == ["0.6667", "0.6667", "no",
                                                                                 "baseline"]
    assert main(["history", "--runs-dir", str(runs), "--retriever", "dense", "--last", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[2].split()[3] == "0.6667"
