"""Stale gold on the sample data: a renamed note leaves labels that resolve to nothing. The run goes on, lists them
and scores what resolved; with evalset.strict_gold it stops at gold_labels' blocking check."""

import hashlib
import json
import shutil

import dagster as dg
import pytest

from rag_eval_assets.defs.jobs import INPUTS_JOB, run_pipeline
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.sample_config import SAMPLE, SAMPLE_EVALSET, write_sample_config

SETTINGS = "retrievers: [bm25]\nk_values: [5]\nanswering: {k_values: [5]}\n"
# test_005 keeps one of its two supports (required together: group [0, 1]); test_010's only support is renamed away.
RENAMED = {"notes/Handbook.md": "notes/Observatory Handbook.md", "zh/partnership.txt": "zh/partners.txt"}
UNRESOLVED = [
    ("test_005", "gold_supports[1]", "rel_path 'notes/Handbook.md' names no document with chunks"),
    ("test_010", "gold_supports[0]", "rel_path 'zh/partnership.txt' names no document with chunks"),
]
SUMMARY = (
    "2 gold labels of 2 questions resolve to nothing in the corpus. Each question is scored on the labels that did "
    "resolve; 1 question with no resolved label at all (test_010) is left out of every metric that needs gold (the "
    "retrieval metrics among them), as unlabelled questions are."
)


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    """The sample corpus after two notes were renamed, a config over it, and a Dagster instance."""
    tmp = tmp_path_factory.mktemp("stale_gold")
    corpus = tmp / "corpus"
    shutil.copytree(SAMPLE / "corpus", corpus)
    for old, new in RENAMED.items():
        (corpus / old).rename(corpus / new)
    (tmp / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "home")) as instance:
        yield tmp, corpus, instance


@pytest.fixture(scope="module")
def lenient(renamed):
    tmp, corpus, instance = renamed
    config = write_sample_config(tmp, SETTINGS, corpus=corpus)
    steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
    return tmp / "store", steps


def _check(steps, name="gold_resolves"):
    (evaluation,) = [c for s in steps for c in s.result.get_asset_check_evaluations() if c.check_name == name]
    return evaluation


def _gold_labels_metadata(steps):
    (event,) = [e for s in steps for e in s.result.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey("gold_labels")]
    return event.materialization.metadata


def test_stale_gold_is_a_warning_and_the_run_goes_on(lenient):
    store, steps = lenient
    assert all(s.result.success for s in steps) and steps[-1].job == "metrics_job"
    unresolved = _gold_labels_metadata(steps)["unresolved_gold"].value
    assert [(u["query_id"], u["support"], u["why"]) for u in unresolved["labels"]] == UNRESOLVED
    assert {u["file"] for u in unresolved["labels"]} == {str(SAMPLE_EVALSET)}
    assert [u["line"] for u in unresolved["labels"]] == [5, 10]
    assert unresolved["unscored_questions"] == ["test_010"]

    check = _check(steps)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.description.startswith(SUMMARY + " First: test_005 gold_supports[1]: rel_path 'notes/Handbook.md'")
    assert check.metadata["unresolved"].value == 2 and check.metadata["unscored_questions"].value == 1


def test_each_question_is_scored_on_the_gold_that_resolved(lenient):
    store, _ = lenient
    gold = stored_table(store / "assets", "gold_labels")
    assert set(gold.loc[gold["query_id"] == "test_005", "support_index"]) == {0}
    assert "test_010" not in set(gold["query_id"])

    per_query = stored_table(store / "assets", "retrieval_metrics_per_query")
    values = per_query[per_query["k"] == 5].pivot_table(index="query_id", columns="metric", values="value",
                                                        dropna=False)
    assert values.loc["test_010"].isna().all()  # nothing resolved: unlabelled, left out
    # test_005's group [0, 1] loses the unresolved support 1: recall_all@5 asks for support 0 alone, which bm25 puts
    # in the top 5 (support 1 kept in the group would have made recall_all@5 impossible).
    results = stored_table(store / "assets", "retrieval_results/retriever=bm25")
    top5 = set(results[(results["query_id"] == "test_005") & (results["rank"] <= 5)]["chunk_id"])
    assert top5 & set(gold.loc[gold["query_id"] == "test_005", "chunk_id"])
    assert values.loc["test_005", "recall_all@k"] == values.loc["test_005", "recall_any@k"] == 1.0

    table = stored_table(store / "assets", "retrieval_metrics")
    hit = table[(table["slice"] == "all") & (table["metric"] == "hit@k")]
    evalset = stored_table(store / "assets", "evalset")
    assert hit["n"].item() == len(evalset) - 1  # every question (negatives too) but test_010


def test_the_run_reports_list_the_unresolved_gold(lenient):
    store, _ = lenient
    (run_dir,) = (store / "runs").iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert [(u["query_id"], u["support"], u["why"]) for u in metrics["unresolved_gold"]["labels"]] == UNRESOLVED

    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    section = summary.split("## Unresolved gold\n\n", 1)[1].split("\n\n## ", 1)[0]
    assert section.startswith(SUMMARY + "\n\n| question | support | why | where |")
    for (query_id, support, why), line in zip(UNRESOLVED, (5, 10)):
        assert f"| {query_id} | {support} | {why} | {SAMPLE_EVALSET}:{line} |" in section

    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<h2 id="unresolved-gold">Unresolved gold</h2>' in report
    assert SUMMARY in report
    for query_id, support, why in UNRESOLVED:
        assert f"<td>{query_id}</td><td>{support}</td><td>{why.replace(chr(39), '&#x27;')}</td>" in report


def test_strict_gold_stops_the_run_before_retrieval(lenient, renamed):
    store, _ = lenient
    tmp, corpus, instance = renamed
    written = sorted(p for folder in ("retrieval_results", "answers") for p in (store / "assets" / folder).rglob("*")
                     if p.is_file())
    assert written, "the lenient run wrote retrieval results and answers"
    before = {p: (hashlib.md5(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in written}
    runs_before = sorted((store / "runs").iterdir())

    config = write_sample_config(tmp, SETTINGS, corpus=corpus, strict_gold=True)
    steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
    assert [(s.job, s.result.success) for s in steps] == [(INPUTS_JOB, False)]
    # Preflight resolves gold before any table is written: with strict_gold the stale labels stop the run there.
    failure = next(e for e in steps[0].result.all_events if e.is_step_failure)
    assert failure.step_key == "preflight"
    error = failure.step_failure_data.error
    message = error.message + (error.cause.message if error.cause else "")
    assert "gold_supports[1]" in message
    assert not steps[0].result.get_asset_materialization_events()

    assert {p: (hashlib.md5(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in written} == before
    assert sorted((store / "runs").iterdir()) == runs_before


def test_a_malformed_evalset_line_still_stops_the_run(tmp_path):
    evalset = tmp_path / "eval_set.jsonl"
    lines = SAMPLE_EVALSET.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    del record["gold_supports"][0]["rel_path"]
    lines[2] = json.dumps(record, ensure_ascii=False)
    evalset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = write_sample_config(tmp_path, SETTINGS, evalset=evalset, name="broken")
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        result = build_defs(config).resolve_job_def(INPUTS_JOB).execute_in_process(instance=instance,
                                                                                  raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_key == "preflight"
    error = failure.step_failure_data.error
    message = error.message + (error.cause.message if error.cause else "")
    assert f"{evalset}:3: field 'gold_supports[0].rel_path'" in message
    assert "gold_labels" not in {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
