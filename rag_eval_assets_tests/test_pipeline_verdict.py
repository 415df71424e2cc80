"""The verdict end to end on a generated BEIR collection, through `rag-eval run` and `rag-eval compare`: a BM25
broken on purpose is `worse` at every answer k, an identical re-run and a small parameter change are not, and the
Dagster metadata leads with the verdict and holds the whole gate table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets_tests.dagster_server import BIN, dagster_env, running_server, wait_for_asset_keys
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.synthetic_beir import write_collection
from rag_eval_assets_tests.test_ui_browser import browser  # noqa: F401 (a fixture)

ANSWER_KS = (5, 10)
# nDCG of one relevant document at rank 2 and rank 4. Ranks by hand (synthetic_beir): the 60 clear queries rank
# their document 1st, or 4th with k1 0.05 and b 0; the 6 borderline ones rank it 1st on 2 (k1 0.9) or 4 (k1 1.0)
# queries and 2nd on the rest, 2nd on all 6 when broken.
AT_2, AT_4 = 1 / 1.584962500721156, 1 / 2.321928094887362
N = 66
DEFAULT = {1: 62 / N, 3: (62 + 4 * AT_2) / N, 5: (62 + 4 * AT_2) / N, 10: (62 + 4 * AT_2) / N}
SMALL = {1: 64 / N, 3: (64 + 2 * AT_2) / N, 5: (64 + 2 * AT_2) / N, 10: (64 + 2 * AT_2) / N}
BROKEN = {1: 0.0, 3: 6 * AT_2 / N, 5: (60 * AT_4 + 6 * AT_2) / N, 10: (60 * AT_4 + 6 * AT_2) / N}


def _config(tmp: Path, collection: Path, k1: float, b: float) -> Path:
    path = tmp / "rag_eval.yaml"
    path.write_text(
        f"storage_dir: {tmp / 'store'}\n"
        f"corpus: {{id: synthetic, path: {collection}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {collection}}}\n"
        "chunking: {chunk_size_chars: 100000, overlap_chars: 0}\n"
        "retrievers: [bm25]\nk_values: [1, 3, 5, 10]\n"
        f"answering: {{k_values: {list(ANSWER_KS)}}}\n"
        f"retrieval: {{level: doc, bm25: {{k1: {k1}, b: {b}}}}}\n"
        "report: {gate: {top_questions: 70}}\n",  # every question that moved, to sort them in the report
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """Four runs into one store: the default BM25, the same again (forced), k1 0.9 -> 1.0, and k1 0.05 with b 0."""
    tmp = tmp_path_factory.mktemp("verdict")
    collection = write_collection(tmp / "beir")
    home = tmp / "home"
    home.mkdir()
    runs = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        for name, k1, b in (("default", 0.9, 0.4), ("rerun", 0.9, 0.4), ("k1_1.0", 1.0, 0.4), ("broken", 0.05, 0.0)):
            # The same configuration again is re-run with --force (a plain run would find nothing stale).
            force = ["--force"] if name == "rerun" else []
            code = main(["--config", str(_config(tmp, collection, k1, b)), "run", *force])
            newest = max((p for p in (tmp / "store" / "runs").iterdir() if not p.name.startswith(".")),
                         key=lambda p: json.loads((p / "metrics.json").read_text())["run"]["created_at"] + p.name)
            assert newest not in [r for _, r in runs.values()]
            runs[name] = (code, newest)
        with dg.DagsterInstance.get() as instance:
            metadata = {key: instance.get_latest_materialization_event(dg.AssetKey(key)).asset_materialization.metadata
                        for key in ("evaluation_run", "run_comparison")}
    return tmp, runs, metadata


def _compare(base: Path, cand: Path, out: Path) -> tuple[int, dict]:
    code = main(["compare", "--base", str(base), "--cand", str(cand), "--out", str(out)])
    return code, json.loads((out / "comparison.json").read_text(encoding="utf-8"))


def test_the_pipeline_exits_non_zero_only_for_the_broken_bm25(nights):
    _, runs, _ = nights
    assert {name: code for name, (code, _) in runs.items()} == {"default": 0, "rerun": 0, "k1_1.0": 0, "broken": 1}
    recorded = {name: json.loads((path / "comparison.json").read_text())["verdict"]
                for name, (_, path) in runs.items() if name != "default"}
    assert recorded == {"rerun": "no significant change", "k1_1.0": "no significant change", "broken": "worse"}
    assert not (runs["default"][1] / "comparison.json").exists()


def test_compare_gives_the_three_outcomes(nights, tmp_path, capsys):
    _, runs, _ = nights
    default = runs["default"][1]
    code, same = _compare(default, runs["rerun"][1], tmp_path / "same")
    assert (code, same["verdict"]) == (0, "no significant change")
    assert all(c["delta"] == 0.0 and c["result"] == "no significant change" for c in same["cells"])

    # k1 0.9 -> 1.0 really moves two borderline questions: a real delta, but two questions are noise.
    code, small = _compare(default, runs["k1_1.0"][1], tmp_path / "small")
    assert (code, small["verdict"]) == (0, "no significant change")
    cells = {c["k"]: c for c in small["cells"]}
    for k, cell in cells.items():
        assert cell["delta"] == pytest.approx(SMALL[k] - DEFAULT[k]) and cell["delta"] > 0
        assert cell["p_value"] == pytest.approx(0.5)  # exact sign-flip test: 2 of the 4 sign patterns as extreme
        assert cell["ci_low"] <= 0 < cell["ci_high"] and not cell["significant"]
    # The same two questions the other way round are flips from success to failure at k = 1, still noise.
    code, back = _compare(runs["k1_1.0"][1], default, tmp_path / "back")
    assert (code, back["verdict"]) == (0, "no significant change")
    assert {c["k"]: c["regressions"] for c in back["cells"]} == {1: 2, 3: 0, 5: 0, 10: 0}
    assert back["regressions"] == 0  # counted only where the cell's change is significant

    code, broken = _compare(default, runs["broken"][1], tmp_path / "broken")
    assert (code, broken["verdict"]) == (1, "worse")
    cells = {c["k"]: c for c in broken["cells"]}
    assert sorted(cells) == [1, 3, 5, 10] and all(c["metric"] == "ndcg@k" for c in cells.values())
    for k in ANSWER_KS:
        cell = cells[k]
        assert cell["delta"] == pytest.approx(BROKEN[k] - DEFAULT[k])
        assert cell["result"] == "worse" and cell["ci_high"] < 0 and cell["p_adjusted"] < 0.001
    assert broken["deciding_cells"] == ["bm25@1", "bm25@3", "bm25@5", "bm25@10"]
    out = capsys.readouterr().out
    assert "Verdict: WORSE (exit 1)" in out and "Verdict: NO SIGNIFICANT CHANGE (exit 0)" in out


def test_the_ui_metadata_leads_with_the_verdict_and_holds_the_whole_gate_table(nights):
    tmp, runs, metadata = nights
    evaluation, comparison = metadata["evaluation_run"], metadata["run_comparison"]
    assert list(evaluation)[:5] == ["verdict", "verdict_score", "gate", "best", "ranking"]
    assert evaluation["verdict"].value.startswith(f"worse against run {runs['k1_1.0'][1].name} (exit 1; decided by")
    assert evaluation["verdict_score"].value == -1.0
    assert evaluation["ndcg@10 bm25"].value == pytest.approx(BROKEN[10])
    assert evaluation["ranking"].value.startswith(
        "\n".join(f"- k={k}: bm25 alone, ndcg@k {BROKEN[k]:.3f}" for k in BROKEN)
        + "\n\n### k=1\n\n| rank | retriever | best set | p (best) | ndcg@k (gate) |")
    # One retriever: the best, alone in its set, at every k.
    assert [(r.data["k"], r.data["best"], r.data["set_size"]) for r in evaluation["best"].value.records] == [
        (k, "bm25", 1) for k in BROKEN]
    assert list(comparison)[:3] == ["verdict", "verdict_score", "gate"]
    gate = comparison["gate"].value
    for k in (1, 3, 5, 10):
        assert f"| bm25@{k} | ndcg@k | {SMALL[k]:.4f} |" in gate and gate.count("| worse |") == 4
    # The worse run's table is kept, named in its metadata, but its failed gate left the previous run's current.
    table = pd.read_parquet(tmp / "store" / "assets" / comparison["stored_as"].value)
    gated = table[table["gate"]]
    assert list(gated["k"]) == [1, 3, 5, 10] and set(gated["result"]) == {"worse"}
    assert len(table) > len(gated) and table["metric"].nunique() > 5  # every metric's delta, not only the gate's
    current = stored_table(tmp / "store" / "assets", "run_comparison")
    assert set(current.loc[current["gate"], "result"]) == {"no significant change"}


def _independent_drops(default: Path, broken: Path, collection: Path, k: int) -> list[tuple[str, float]]:
    """Each question's nDCG@k drop from default to broken, computed here from qrels.tsv and the documents each run
    retrieved (one relevant document: 1 / log2(rank + 1) within the top k), largest drop first, ties by id."""
    relevant = dict(line.split("\t")[:2] for line in (collection / "qrels.tsv").read_text().splitlines()[1:])

    def ndcg(path: Path) -> dict[str, float]:
        values = {}
        for line in (path / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row["k"] == k:
                ranks = [d["rank"] for d in row["retrieved"] if d["doc_id"] == relevant[row["query_id"]]]
                values[row["query_id"]] = 1 / math.log2(ranks[0] + 1) if ranks and ranks[0] <= k else 0.0
        return values

    before, after = ndcg(default), ndcg(broken)
    drops = [(q, after[q] - before[q]) for q in before if after[q] - before[q] < -1e-9]
    return sorted(drops, key=lambda d: (d[1], d[0]))


def _ranks(path: Path, query_id: str, k: int, doc: str) -> int | None:
    for line in (path / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["query_id"] == query_id and row["k"] == k:
            return next((d["rank"] for d in row["retrieved"] if d["doc_id"] == doc), None)
    raise AssertionError(f"no row {query_id}@{k}")


def test_the_evidence_names_the_largest_drops_with_the_gold_ranks_before_and_after(nights, tmp_path, capsys):
    tmp, runs, metadata = nights
    default, broken = runs["default"][1], runs["broken"][1]
    code = main(["compare", "--base", str(default), "--cand", str(broken), "--out", str(tmp_path),
                 "--top-questions", "70"])
    document = json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8"))
    assert code == 1 and [f"{e['retriever']}@{e['k']}" for e in document["evidence"]] == document["deciding_cells"]
    for e in document["evidence"]:
        k = e["k"]
        named = [(q["change"]["query_id"], q["change"]["diff"]) for q in e["questions"]]
        expected = _independent_drops(default, broken, tmp / "beir", k)
        assert [q for q, _ in named] == [q for q, _ in expected] and e["drops"] == len(expected)
        assert [d for _, d in named] == pytest.approx([d for _, d in expected])
        for q in e["questions"]:
            query_id = q["change"]["query_id"]
            doc = f"{query_id}r" if query_id.startswith("b") else f"d{query_id[1:]}r"
            (gold,) = q["gold"]
            assert (gold["item"], gold["base_rank"], gold["cand_rank"]) == (
                doc, _ranks(default, query_id, k, doc), _ranks(broken, query_id, k, doc))
            marked = [item["doc_id"] for item in q["cand_retrieved"] if item["gold"]]
            assert marked == ([doc] if gold["cand_rank"] is not None else [])
    # By the collection's design: a clear question's document falls from 1st to 4th, out of the top 3.
    by_cell = {e["k"]: {q["change"]["query_id"]: q for q in e["questions"]} for e in document["evidence"]}
    assert [(g["base_rank"], g["cand_rank"]) for g in by_cell[5]["q00"]["gold"]] == [(1, 4)]
    assert [(g["base_rank"], g["cand_rank"]) for g in by_cell[3]["q00"]["gold"]] == [(1, None)]
    assert len(by_cell[5]) == 62 and by_cell[5]["q00"]["change"]["diff"] == pytest.approx(AT_4 - 1)
    text = capsys.readouterr().out
    assert "Evidence: bm25@3 ndcg@k (worse): 62 questions down (60 success → failure)" in text
    lines = text.splitlines()
    at_3 = lines[lines.index(next(line for line in lines if line.startswith("Evidence: bm25@3"))) + 2:]
    q00 = " ".join(next(line for line in at_3 if line.startswith("  q00 ")).split())
    assert q00.startswith("q00 1.0000 0.0000 -1.0000 success → failure d00r 1 → not in the top 3 raregecarulu")

    # One question in full: both runs' lists at the largest k, the gold document marked where each run put it.
    assert main(["show", str(broken), "--question", "q00", "--against", str(default)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert f"bm25@10: gold rank {default.name} → {broken.name}: d00r 1 → 4" in shown
    table = shown[shown.index(f"bm25@10: gold rank {default.name} → {broken.name}: d00r 1 → 4") + 1:][:5]
    assert table[1].split()[:2] == ["1", "★"] and table[1].split()[2].startswith("d00r")
    assert table[4].split()[0] == "4" and "★ d00r" in table[4] and table[4].count("★") == 1
    assert "ndcg@k 1.0000 → 0.4307" in next(line for line in shown if line.startswith("  k=5: "))
    assert main(["show", str(broken), "--question", "nope"]) == 3

    # The UI: run_comparison's metadata carries the deciding cells' question tables.
    evidence = metadata["run_comparison"]["evidence"].value
    assert evidence.startswith("#### bm25@1 ndcg@k (worse): ")
    assert "| q00 | 1.0000 | 0.4307 | -0.5693 | success → failure | d00r 1 → 4 |" in evidence


def test_the_report_sorts_the_deciding_cells_questions_and_opens_each_in_chromium(nights, browser):  # noqa: F811
    """The broken run's report.html against its baseline (k1 1.0): at k = 5 the 60 clear questions fell by
    1 - nDCG(4th) and the 4 borderline ones by 1 - nDCG(2nd); sorting by difference puts those 4 first, and a
    question opens on both runs' lists with its gold document marked where each run put it."""
    from playwright.sync_api import expect

    _, runs, _ = nights
    page = browser.new_page()
    page.goto((runs["broken"][1] / "report.html").as_uri())
    section = page.locator("section.evidence[data-cell='bm25@5']")
    expect(section.locator("h3")).to_contain_text("bm25@5 ndcg@k (worse): 64 questions down")
    questions = section.locator("tbody.question")
    expect(questions).to_have_count(64)
    diffs = lambda: [float(d) for d in questions.evaluate_all("bodies => bodies.map(b => b.dataset.diff)")]
    assert diffs() == sorted(diffs()) and diffs()[0] == pytest.approx(AT_4 - 1)
    section.locator("th[data-sort]").click()
    assert diffs() == sorted(diffs(), reverse=True) and diffs()[0] == pytest.approx(AT_2 - 1)
    assert questions.first.get_attribute("data-query").startswith("b")
    q00 = section.locator("tbody.question[data-query='q00']")
    lists = q00.locator("tr.lists")
    expect(lists).to_be_hidden()
    q00.locator("button.toggle").click()
    expect(lists).to_be_visible()
    expect(lists.locator("p.gold-ranks")).to_have_text("gold rank base → cand: d00r 1 → 4")
    gold = lists.locator("tr.gold")
    expect(gold).to_have_count(2)  # rank 1 in the baseline, rank 4 in the candidate
    expect(gold.nth(0).locator("td").nth(1)).to_contain_text("★ d00r")
    expect(gold.nth(1).locator("td").nth(0)).to_have_text("4")
    expect(gold.nth(1).locator("td").nth(3)).to_contain_text("★ d00r")
    # The highlight is on the gold side only: at rank 1 the candidate's item is not gold.
    expect(gold.nth(0).locator("td.gold")).to_have_count(2)
    expect(gold.nth(0).locator("td").nth(1)).to_have_class("gold")
    expect(gold.nth(0).locator("td").nth(3)).not_to_have_class("gold")
    expect(gold.nth(1).locator("td").nth(3)).to_have_class("gold")
    page.close()


def test_the_ui_shows_the_deciding_cells_questions_in_chromium(nights, browser):  # noqa: F811
    """The Dagster UI on the nights' instance: run_comparison's `evidence` metadata opens on one question table per
    deciding cell, the clear questions' gold document fallen from 1st to 4th at k = 5."""
    tmp, _, _ = nights
    env = dagster_env(tmp / "home", tmp / "rag_eval.yaml")
    with running_server([str(BIN / "dagster-webserver"), "-w", "workspace.yaml"], env, tmp / "webserver.log") as url:
        wait_for_asset_keys(url)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.set_default_timeout(60_000)
        page.goto(f"{url}/assets/run_comparison")
        row = page.locator("tr", has=page.get_by_text("evidence", exact=True))
        row.get_by_text("[Show Markdown]").click()
        dialog = page.get_by_role("dialog")
        headings = dialog.locator("h4")
        headings.nth(3).wait_for()
        assert [h.split(":")[0] for h in headings.all_inner_texts()] == [
            f"bm25@{k} ndcg@k (worse)" for k in (1, 3, 5, 10)]
        at_5 = dialog.locator("table").nth(2).locator("tr", has=page.get_by_text("q00", exact=True))
        assert at_5.locator("td").all_inner_texts()[:6] == [
            "q00", "1.0000", "0.4307", "-0.5693", "success → failure", "d00r 1 → 4"]
        page.close()
