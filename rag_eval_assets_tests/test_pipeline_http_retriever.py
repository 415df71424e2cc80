"""A RAG service under test named as a retriever: asked once per question per run (sut_responses), its retrieval
results and its answers at every k read from those responses, and scored by gold anchors."""

import json
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.defs.jobs import METRICS_JOB, run_pipeline
from rag_eval_assets.defs.storage.parquet_io_manager import PIPELINE_TAG
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import SAMPLE, write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.sut_server import CorpusChunk, sut_server

# A service that answers every question from notes on another subject: it never returns a gold chunk.
UNRELATED = [CorpusChunk("garden/roses.md", "Roses > Pruning", "Prune roses in early spring, above an outward bud."),
             CorpusChunk("garden/roses.md", "Roses > Feeding", "Feed roses with compost after the first flush."),
             CorpusChunk("garden/tomatoes.md", "Tomatoes", "Pinch out tomato side shoots every week.")]


N_QUESTIONS = sum(1 for line in (SAMPLE / "evalsets" / "eval_set.jsonl").read_text().splitlines() if line)


def _service_corpus() -> tuple[pd.DataFrame, list[CorpusChunk]]:
    # The service chunks the same notes its own way (smaller chunks), so its chunk ids differ from ours.
    chunks = chunk_documents(load_corpus(SAMPLE / "corpus"), "service", ChunkerParams(400, 50))
    return chunks, [CorpusChunk(r.rel_path, r.heading_path, r.text) for r in chunks.itertuples()]


def _run(tmp_path, url: str, times: int = 1, retrievers: str = "[bm25, http]") -> list:
    """The steps of the first pipeline run (of `times`, one after the other on one instance)."""
    config = write_sample_config(
        tmp_path,
        f"retrievers: {retrievers}\nk_values: [1, 5]\nanswering: {{k_values: [1, 5]}}\n"
        f"retrieval: {{http: {{base_url: '{url}', read_timeout: 10, max_attempts: 1}}}}\n",
    )
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        runs = [list(run_pipeline(build_defs(config), load_settings(config), instance)) for _ in range(times)]
    return runs if times > 1 else runs[0]


def test_http_partition_is_fetched_once_per_question_and_scored(tmp_path):
    chunks, corpus = _service_corpus()
    with sut_server(corpus) as server:
        steps, again = _run(tmp_path, server.url, times=2)
        assert all(s.result.success for s in steps + again), [s.job for s in steps + again if not s.result.success]
        asks = [r for r in server.requests if r.path == "/api/v1/ask"]
        # One call per question per run, at the largest k: retrieval (k 1 and 5) and answers (k 1 and 5) are read
        # from it. The second run, with nothing of ours changed, calls the service again (it may have changed) and
        # re-runs what reads its responses (every answer cell reads them), never our own retrieval.
        assert len(asks) == 2 * N_QUESTIONS
        assert all(r.query.get("debug") == ["true"] and r.body["k"] == 5 for r in asks)
        assert [(s.job, s.partition) for s in again] == [
            ("sut_job", "http"), ("retrieval_grid_job", "http"),
            *(("answer_grid_job", f"{k}|{r}") for k in (1, 5) for r in ("bm25", "http")), ("metrics_job", None)]
    n_questions = N_QUESTIONS

    results = stored_table(tmp_path / "store" / "assets", "retrieval_results/retriever=http")
    assert not set(results["chunk_id"]) & set(chunks["chunk_id"])  # its ids, not ours
    table = stored_table(tmp_path / "store" / "assets", "retrieval_metrics")
    row = table[(table.retriever == "http") & (table.slice == "all") & (table.metric == "recall_any@k") & (table.k == 5)]
    assert len(row) == 1 and 0 < row["value"].iloc[0] <= 1
    answers = stored_table(tmp_path / "store" / "assets", "answers/retriever=http/k=5")
    assert set(answers["answerer"]) == {"http"} and len(answers) == n_questions
    at_one = stored_table(tmp_path / "store" / "assets", "answers/retriever=http/k=1")
    assert at_one["answer"].tolist() == answers["answer"].tolist()  # the one response, read at every k
    assert not answers["abstained_inferred"].any()  # the service reports its abstention flag
    assert (answers.loc[~answers["abstained"], "answer"].str.len() > 0).all()
    ours = stored_table(tmp_path / "store" / "assets", "answers/retriever=bm25/k=5")
    assert set(ours["answerer"]) == {"extractive"}


def test_a_failed_call_is_an_error_row_not_an_aborted_partition(tmp_path):
    _, corpus = _service_corpus()
    with sut_server(corpus, faults=[503, "wrong_shape"]) as server:
        steps = _run(tmp_path, server.url)
        assert len([r for r in server.requests if r.path == "/api/v1/ask"]) == N_QUESTIONS
    # Every partition succeeds; the outage is counted and fails the run at its blocking health check, not silently.
    assert [s.job for s in steps if not s.result.success] == [METRICS_JOB]
    (health,) = [c for c in steps[-1].result.get_asset_check_evaluations() if c.check_name == "call_health"]
    assert not health.passed, health.description
    assert (f"http@1 answer answer: 2 of 14 calls to the service under test at {server.url}/api/v1/ask?debug=true "
            "failed (14% > 5%); first error: ") in health.description
    (sut,) = [e.materialization for s in steps for e in s.result.get_asset_materialization_events()
              if e.materialization.asset_key.to_user_string() == "sut_responses"]
    assert (sut.metadata["calls"].value, sut.metadata["errors"].value) == (N_QUESTIONS, 2)
    assets = tmp_path / "store" / "assets"
    # The failed check committed nothing: what the run wrote is staged under its pipeline.
    pipeline = steps[0].result.dagster_run.tags[PIPELINE_TAG]
    responses = stored_table(assets, "sut_responses/retriever=http", pipeline)
    failed = responses[responses["error"].notna()]
    assert len(failed) == 2 and "status 503" in failed["error"].iloc[0]
    results = stored_table(assets, "retrieval_results/retriever=http", pipeline)
    assert set(results["query_id"]) == set(responses["query_id"]) - set(failed["query_id"])
    answers = stored_table(assets, "answers/retriever=http/k=5", pipeline)
    errors = answers.set_index("query_id").loc[failed["query_id"], "error"]
    assert errors.tolist() == failed["error"].tolist()  # counted and shown on the answer side too
    per_query = stored_table(assets, "retrieval_metrics_per_query", pipeline)
    lost = per_query[(per_query.retriever == "http") & per_query.query_id.isin(failed["query_id"])
                     & (per_query.metric == "hit@k")]
    assert len(lost) and (lost["value"] == 0).all()  # a failed call scores as retrieving nothing


def _defined(per_query: pd.DataFrame, retriever: str) -> set[tuple[str, int, str]]:
    rows = per_query[(per_query.retriever == retriever) & per_query["value"].notna()]
    return set(zip(rows.query_id, rows.k, rows.metric))


def test_a_service_that_never_returns_gold_scores_zero_on_every_labelled_question(tmp_path):
    with sut_server(UNRELATED) as server:
        steps = _run(tmp_path, server.url)
    assert all(s.result.success for s in steps), [s.job for s in steps if not s.result.success]
    assets = tmp_path / "store" / "assets"
    labelled = set(stored_table(assets, "gold_labels")["query_id"])
    assert len(labelled) == N_QUESTIONS - 1  # every question but the unanswerable test_009
    per_query = stored_table(assets, "retrieval_metrics_per_query")
    # Scored on exactly bm25's questions and metrics: a gold it never returned is a miss, not a question left out.
    assert _defined(per_query, "http") == _defined(per_query, "bm25")
    http = per_query[(per_query.retriever == "http") & per_query["value"].notna()]
    assert (http["value"] == 0).all()
    for metric in ("hit@k", "recall@k", "ndcg@k", "mrr@k"):
        assert set(http.loc[http.metric == metric, "query_id"]) >= labelled, metric
    table = stored_table(assets, "retrieval_metrics")
    overall = table[table.slice == "all"].set_index(["retriever", "k", "metric"])
    for k in (1, 5):
        for metric in ("hit@k", "ndcg@k", "mrr@k", "recall@k"):
            n = len(labelled) + (metric == "hit@k")  # hit@k also counts the unanswerable question (0 by definition)
            assert overall.loc[("http", k, metric), "n"] == overall.loc[("bm25", k, metric), "n"] == n
            assert overall.loc[("http", k, metric), "value"] == 0.0
    assert overall.loc[("bm25", 5, "hit@k"), "value"] > 0


def test_a_service_alone_runs_end_to_end(tmp_path):
    _, corpus = _service_corpus()
    with sut_server(corpus) as server:
        steps = _run(tmp_path, server.url, retrievers="[http]")
        assert len([r for r in server.requests if r.path == "/api/v1/ask"]) == N_QUESTIONS
    assert all(s.result.success for s in steps), [s.job for s in steps if not s.result.success]
    assert [(s.job, s.partition) for s in steps] == [
        ("inputs_job", None), ("sut_job", "http"), ("retrieval_grid_job", "http"),
        *(("answer_grid_job", f"{k}|http") for k in (1, 5)), ("metrics_job", None)]
    (health,) = [c for c in steps[-1].result.get_asset_check_evaluations() if c.check_name == "call_health"]
    assert health.passed and health.description == "0 of 28 calls failed, within 5% per cell"
    assets = tmp_path / "store" / "assets"
    labelled = set(stored_table(assets, "gold_labels")["query_id"])
    table = stored_table(assets, "retrieval_metrics")
    assert set(table["retriever"]) == {"http"}
    hit = table[(table.slice == "all") & (table.metric == "hit@k") & (table.k == 5)]
    assert hit["n"].tolist() == [len(labelled) + 1]  # the labelled questions and the unanswerable one
    assert 0 < hit["value"].iloc[0] <= 1
    (run,) = stored_table(assets, "evaluation_run").itertuples()
    metrics = json.loads((Path(run.run_dir) / "metrics.json").read_text(encoding="utf-8"))
    assert {(h["retriever"], h["k"], h["stage"], h["calls"]) for h in metrics["call_health"]} == {
        ("http", 1, "answer", N_QUESTIONS), ("http", 5, "answer", N_QUESTIONS)}
