"""A RAG service under test named as a retriever: its partition is fetched over HTTP and scored by gold anchors."""


import dagster as dg

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import SAMPLE, write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.sut_server import CorpusChunk, sut_server



def test_http_partition_is_fetched_and_scored(tmp_path):
    # The service chunks the same notes its own way (smaller chunks), so its chunk ids differ from ours.
    chunks = chunk_documents(load_corpus(SAMPLE / "corpus"), "service", ChunkerParams(400, 50))
    corpus = [CorpusChunk(r.rel_path, r.heading_path, r.text) for r in chunks.itertuples()]
    with sut_server(corpus) as server:
        config = write_sample_config(
            tmp_path,
            "retrievers: [bm25, http]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
            f"retrieval: {{http: {{base_url: '{server.url}', read_timeout: 10}}}}\n",
        )
        (tmp_path / "home").mkdir()
        with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
            steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
        assert all(s.result.success for s in steps), [s.job for s in steps if not s.result.success]
        n_questions = sum(1 for line in (SAMPLE / "evalsets" / "eval_set.jsonl").read_text().splitlines() if line)
        asks = [r for r in server.requests if r.path == "/api/v1/ask"]
        # Once for the retrieval partition (depth 5), once for the answer partition k=5 (the service answers itself).
        assert len(asks) == 2 * n_questions and all(r.query.get("debug") == ["true"] for r in asks)

    results = stored_table(tmp_path / "store" / "assets", "retrieval_results/retriever=http")
    assert not set(results["chunk_id"]) & set(chunks["chunk_id"])  # its ids, not ours
    table = stored_table(tmp_path / "store" / "assets", "retrieval_metrics")
    row = table[(table.retriever == "http") & (table.slice == "all") & (table.metric == "recall_any@k") & (table.k == 5)]
    assert len(row) == 1 and 0 < row["value"].iloc[0] <= 1
    answers = stored_table(tmp_path / "store" / "assets", "answers/retriever=http/k=5")
    assert set(answers["answerer"]) == {"http"} and len(answers) == n_questions
    assert not answers["abstained_inferred"].any()  # the service reports its abstention flag
    assert (answers.loc[~answers["abstained"], "answer"].str.len() > 0).all()
    ours = stored_table(tmp_path / "store" / "assets", "answers/retriever=bm25/k=5")
    assert set(ours["answerer"]) == {"extractive"}
