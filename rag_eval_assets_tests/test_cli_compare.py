"""`rag-eval compare`: the CI gate's exit codes 0, 1 and 2 from the command line (seed 000, section 7)."""

from rag_eval_assets.cli import main
from rag_eval_assets_tests.test_runs_compare import BASE, config, crafted_run, hits


def _compare(base, cand, *extra: str) -> int:
    return main(["compare", "--base", str(base.path), "--cand", str(cand.path), *extra])


def test_exit_codes(tmp_path, capsys):
    base = crafted_run(tmp_path, "base", {("bm25", 5): hits(BASE)})
    same = crafted_run(tmp_path, "same", {("bm25", 5): hits(BASE)})
    worse = crafted_run(tmp_path, "worse", {("bm25", 5): hits(BASE - {0, 1, 2})})
    other_evalset = crafted_run(tmp_path, "other", {("bm25", 5): hits(BASE)}, cfg=config(evalset="f" * 64))

    assert _compare(base, same, "--min-delta", "0.0", "--max-regressions", "0") == 0
    assert _compare(base, worse, "--min-delta", "0.0", "--max-regressions", "0") == 1
    out = capsys.readouterr().out
    assert "Top regressions (3 in all" in out
    rows = [line.split() for line in out.splitlines() if "Question q0" in line]
    assert [r[:5] for r in rows] == [["bm25@5", q, "1.000", "->", "0.000"] for q in ("q000", "q001", "q002")]
    # With --significant-only a 3-of-60 drop (p ~ 0.25) is noise: the gate passes.
    assert _compare(base, worse, "--max-regressions", "0", "--min-delta", "-1", "--significant-only") == 0
    assert _compare(base, other_evalset) == 2
    out = capsys.readouterr().out
    assert "evalset_sha256" in out and "e" * 12 in out and "f" * 12 in out
    assert _compare(base, other_evalset, "--ignore-invariants") == 0
