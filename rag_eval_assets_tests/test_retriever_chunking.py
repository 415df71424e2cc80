"""A retriever variant with a chunking of its own: its chunks, gold labels and indexes are built once per chunking,
and its results, metrics and run rows equal, to the last digit, those of a separate run whose top-level chunking is
the variant's (two real `rag-eval run`s on the sample data)."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pandas as pd
import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.preflight import preflight
from rag_eval_assets.errors import InputError
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import SAMPLE, write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table

SMALL = "{chunk_size_chars: 300, overlap_chars: 50}"
OWN = (
    "retrievers:\n"
    "  bm25: {kind: bm25}\n"
    f"  bm25_300: {{kind: bm25, chunking: {SMALL}}}\n"
    f"  bm25_300_tuned: {{kind: bm25, k1: 1.2, b: 0.75, chunking: {SMALL}}}\n"
    f"  dense_300: {{kind: dense, chunking: {SMALL}}}\n"
    f"  hybrid_300: {{kind: hybrid, of: [bm25_300, dense_300], chunking: {SMALL}}}\n"
    "k_values: [1, 5]\nanswering: {k_values: [5]}\n"
)
# The same variants in a run of their own, whose top-level chunking is theirs.
GLOBAL = (
    f"chunking: {SMALL}\n"
    "retrievers:\n"
    "  bm25_300: {kind: bm25}\n"
    "  bm25_300_tuned: {kind: bm25, k1: 1.2, b: 0.75}\n"
    "  dense_300: {kind: dense}\n"
    "  hybrid_300: {kind: hybrid, of: [bm25_300, dense_300]}\n"
    "k_values: [1, 5]\nanswering: {k_values: [5]}\n"
)
SWEPT = ("bm25_300", "bm25_300_tuned", "dense_300", "hybrid_300")
# Wall-clock figures of one run: the only fields two runs of the same configuration may differ in.
TIMINGS = re.compile(r"latency")


def test_a_variant_chunking_is_checked_and_recorded(tmp_path):
    s = load_settings(write_sample_config(tmp_path, OWN))
    assert s.chunking_of("bm25").key == "800-100" and s.chunking_of("bm25_300").key == "300-50"
    assert list(s.chunk_sets) == ["300-50"]
    assert s.variants["bm25_300"].version()["chunking"] == {"chunk_size_chars": 300, "overlap_chars": 50}
    assert "chunking" not in s.variants["bm25"].version()  # absent: the run's top-level chunking
    bad = write_sample_config(tmp_path, (
        "retrievers:\n"
        "  small: {kind: bm25, chunking: {chunk_size_chars: 300, overlap_chars: 300}}\n"
        "  odd: {kind: bm25, chunking: {chunk_size: 300}}\n"
        "  dense_300: {kind: dense, chunking: {chunk_size_chars: 300}}\n"
        "  mixed: {kind: hybrid, of: [bm25, dense_300]}\n"
    ))
    with pytest.raises(InputError) as caught:
        load_settings(bad)
    text = str(caught.value)
    assert "retrievers.small.chunking.overlap_chars': must be < chunk_size_chars (300), got 300" in text
    assert "retrievers.odd.chunking.chunk_size" in text
    assert ("retrievers.mixed.of[1]': 'dense_300' is chunked chunk_size_chars=300, overlap_chars=100, this fusion "
            "chunk_size_chars=800, overlap_chars=100: a fusion ranks the chunks of one chunking") in text


def test_preflight_chunks_and_resolves_gold_for_every_chunking(tmp_path):
    counts = preflight(load_settings(write_sample_config(tmp_path, OWN)))
    documents = load_corpus(SAMPLE / "corpus")
    for key, size, overlap in (("", 800, 100), (" 300-50", 300, 50)):
        assert counts[f"chunks{key}"] == len(chunk_documents(documents, "sample", ChunkerParams(size, overlap)))
    assert counts["chunks 300-50"] > counts["chunks"] and counts["gold_rows 300-50"] > 0


def _run(config, home) -> dict[str, str]:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("DAGSTER_HOME", str(home))
        assert main(["--config", str(config), "run"]) == 0, out.getvalue()
    return dict(re.findall(r"^  (\S+)\s+(materialized.*|up to date|not run.*)$", out.getvalue(), flags=re.M))


def _rows(store, retrievers) -> list[dict]:
    (run,) = list_runs(store / "runs")
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return sorted((_without_timings(r) for r in rows if r["retriever"] in retrievers),
                  key=lambda r: (r["query_id"], r["retriever"], r["k"]))


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if not TIMINGS.search(k)}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _table(store, entry, retrievers) -> pd.DataFrame:
    table = stored_table(store / "assets", entry)
    table = table[table["retriever"].isin(retrievers)].drop(columns=[c for c in table.columns if TIMINGS.search(c)])
    return table.sort_values([c for c in ("retriever", "query_id", "k", "slice", "metric", "rank")
                              if c in table.columns], kind="stable").reset_index(drop=True)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    own, alone = tmp_path_factory.mktemp("own"), tmp_path_factory.mktemp("alone")
    listing = _run(write_sample_config(own, OWN), own / "home")
    _run(write_sample_config(alone, GLOBAL), alone / "home")
    return own / "store", alone / "store", listing


def test_each_chunking_is_built_once_however_many_variants_search_it(two_runs):
    _, _, listing = two_runs
    built = {name for name, state in listing.items() if state.startswith("materialized")}
    # One chunks, gold and BM25 term-count table per chunking: bm25_300 and bm25_300_tuned share one.
    assert {"chunks", "gold_labels", "bm25_index", "chunks/300-50", "gold_labels/300-50", "bm25_index/300-50",
            "dense_index/all-MiniLM-L6-v2/300-50"} <= built
    assert not any(name.startswith("dense_index") and not name.endswith("/300-50") for name in built)
    assert len([name for name in listing if name.startswith("bm25_index")]) == 2


def test_a_variant_equals_a_run_with_its_chunking_as_the_global_one(two_runs):
    own, alone, _ = two_runs
    assert stored_table(own / "assets", "chunks/300-50").equals(stored_table(alone / "assets", "chunks"))
    assert stored_table(own / "assets", "gold_labels/300-50").equals(stored_table(alone / "assets", "gold_labels"))
    for name in SWEPT:
        pd.testing.assert_frame_equal(_table(own, f"retrieval_results/retriever={name}", SWEPT),
                                      _table(alone, f"retrieval_results/retriever={name}", SWEPT), check_exact=True)
        pd.testing.assert_frame_equal(_table(own, f"answers/retriever={name}/k=5", SWEPT),
                                      _table(alone, f"answers/retriever={name}/k=5", SWEPT), check_exact=True)
    for entry in ("retrieval_metrics_per_query", "answer_metrics_per_query", "retrieval_metrics", "answer_metrics"):
        pd.testing.assert_frame_equal(_table(own, entry, SWEPT), _table(alone, entry, SWEPT), check_exact=True)
    own_rows, alone_rows = _rows(own, SWEPT), _rows(alone, SWEPT)
    assert len(own_rows) == len(alone_rows) > 0
    assert own_rows == alone_rows
    # The metric tables carry each retriever's own chunking.
    metrics = stored_table(own / "assets", "retrieval_metrics")
    assert set(map(tuple, metrics[["retriever", "chunk_size_chars", "overlap_chars"]].drop_duplicates().values)) == {
        ("bm25", 800, 100), *((name, 300, 50) for name in SWEPT)}


def test_the_run_records_each_variant_chunking(two_runs):
    own, _, _ = two_runs
    (run,) = list_runs(own / "runs")
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    retrievers = config["version_tuple"]["retriever"]["retrievers"]
    assert retrievers["bm25_300"]["chunking"] == {"chunk_size_chars": 300, "overlap_chars": 50}
    assert retrievers["hybrid_300"]["of"][1]["chunking"] == {"chunk_size_chars": 300, "overlap_chars": 50}
    assert "chunking" not in retrievers["bm25"]
    assert config["version_tuple"]["index"]["chunk_size_chars"] == 800  # the top-level chunking


def test_a_variant_that_changes_its_chunking_is_compared_with_the_baseline_cell_by_cell(two_runs):
    """Last in this file: it adds a run to the first store. A new chunking for one variant re-runs that variant
    only, and the comparison with the baseline still judges every variant's cells, naming the change."""
    own, _, _ = two_runs
    config = write_sample_config(own.parent, OWN.replace(
        f"bm25_300_tuned: {{kind: bm25, k1: 1.2, b: 0.75, chunking: {SMALL}}}",
        "bm25_300_tuned: {kind: bm25, k1: 1.2, b: 0.75, chunking: {chunk_size_chars: 400, overlap_chars: 50}}"))
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("DAGSTER_HOME", str(own.parent / "home"))
        code = main(["--config", str(config), "run"])
    listing = dict(re.findall(r"^  (\S+)\s+(materialized.*|up to date|not run.*)$", out.getvalue(), flags=re.M))
    grid = {name for name, state in listing.items() if state.startswith("materialized") and "[" in name}
    assert grid == {"retriever_config[bm25_300_tuned]", "retrieval_results[bm25_300_tuned]",
                    "answers[5|bm25_300_tuned]", "judged_answers[5|bm25_300_tuned]"}
    candidate, base = list_runs(own / "runs")[:2]
    comparison = json.loads((candidate / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["base_run_id"] == base.name and comparison["verdict"] != "incompatible"
    assert code == comparison["exit_code"]
    assert {(c["retriever"], c["k"]) for c in comparison["cells"]} == {
        (name, k) for name in ("bm25", *SWEPT) for k in (1, 5)}
    assert {c["retriever"] for c in comparison["cells"] if c["identical"]} == {"bm25", *SWEPT} - {"bm25_300_tuned"}
    text = (candidate / "comparison.md").read_text(encoding="utf-8")
    assert "version_tuple.retriever.retrievers.bm25_300_tuned.chunking.chunk_size_chars" in text
