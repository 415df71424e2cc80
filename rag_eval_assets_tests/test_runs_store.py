"""The run store: rows from the long tables, run directories written atomically, truncation and secret dropping."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.corpus.model import CHUNK_COLUMNS
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_for_metrics, questions_to_frame
from rag_eval_assets.generation.judges import judge_input_sha256
from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.retrieval import retrieval_metrics
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.runs.contents import metrics_document, results_rows, run_config
from rag_eval_assets.runs.judge_inputs import JUDGE_INPUTS_FILE, read_judge_inputs
from rag_eval_assets.runs.listing import latest_run
from rag_eval_assets.runs.save import save_run
from rag_eval_assets.runs.store import CONFIG_FILE, METRICS_FILE, RESULTS_FILE, SUMMARY_FILE, read_run
from rag_eval_assets.runs.versions import VersionTuple

NOW = datetime(2025, 12, 18, 6, 36, 17, tzinfo=timezone.utc)
TYPES = ("definition", "fact", "negative")


def sample_tables(n_questions: int = 12, seed: int = 0, retrievers=("bm25", "dense"), ks=(1, 3, 5)) -> dict:
    """A small evaluation made with the project's own code: questions with gold chunk ids, chunks, ranked results,
    per-query retrieval metrics (+ context_precision / context_recall at k = 3), answers and judgments at k = 3."""
    rng = np.random.default_rng(seed)
    n_chunks = 30
    chunks = pd.DataFrame(
        {
            "chunk_id": [f"c{i:02d}" for i in range(n_chunks)],
            "doc_id": [f"doc{i // 3}" for i in range(n_chunks)],
            "corpus_id": "sample",
            "rel_path": [f"notes/doc{i // 3}.md" for i in range(n_chunks)],
            "heading_path": [f"Doc {i // 3} > Part {i % 3}" for i in range(n_chunks)],
            "page": pd.array([None] * n_chunks, dtype="Int64"),
            "chunk_index": [i % 3 for i in range(n_chunks)],
            "text": [f"Chunk {i} " + "lorem ipsum " * 40 for i in range(n_chunks)],
            "char_start": 0,
            "char_end": 490,
            "n_tokens": 80,
        }
    )[list(CHUNK_COLUMNS)]
    questions = [
        Question(
            id=f"q{i:02d}",
            question=f"What does chunk {i} say about topic {i}? " + "Context " * 40,
            format="seed001",
            type=TYPES[i % 3],
            gold_chunk_ids=() if TYPES[i % 3] == "negative" else (f"c{i % n_chunks:02d}",),
            gold_doc_ids=() if TYPES[i % 3] == "negative" else (f"doc{(i % n_chunks) // 3}",),
        )
        for i in range(n_questions)
    ]
    rows = []
    for retriever in retrievers:
        for q in questions:
            ranked = list(rng.permutation(n_chunks)[:10])
            if q.gold_chunk_ids:
                # The gold chunk at a random position, or not retrieved at all: hit@k then grows with k.
                gold_chunk = int(q.gold_chunk_ids[0][1:])
                ranked = [c for c in ranked if c != gold_chunk]
                ranked.insert(int(rng.integers(0, 12)), gold_chunk)
                ranked = ranked[:10]
            for rank, c in enumerate(ranked, start=1):
                rows.append((q.id, retriever, rank, f"c{c:02d}", f"doc{c // 3}", 1.0 / rank, np.nan, np.nan, 0.02))
    results = pd.DataFrame(
        rows,
        columns=["query_id", "retriever", "rank", "chunk_id", "doc_id", "score", "score_lexical", "score_semantic", "latency_s"],
    )
    gold = resolve_gold(questions, chunks)
    metric_questions = questions_for_metrics(questions)
    per_query = retrieval_metrics(results, gold, metric_questions, ks)
    context = [
        (q.id, retriever, 3, metric, float(rng.random()))
        for retriever in retrievers
        for q in questions
        for metric in ("context_precision", "context_recall")
    ]
    per_query = pd.concat([per_query, pd.DataFrame(context, columns=list(per_query.columns))], ignore_index=True)
    answers = pd.DataFrame(
        [
            {
                "query_id": q.id,
                "retriever": retriever,
                "k": 3,
                "answerer": "llm",
                "answer": f"The answer to {q.id} is in chunk c00 (Doc 0 > Part 0). " + "More words. " * 30,
                "citations": json.dumps([{"chunk_id": "c00", "rel_path": "notes/doc0.md", "heading_path": "Doc 0",
                                          "page": None, "label": "[1]"}]),
                "abstained": False,
                "abstained_inferred": False,
                "abstain_reason": None,
                "contexts": "[]",
                "latency_s": 0.5,
                "prompt_tokens": 300,
                "completion_tokens": 40,
                "cost_usd": 0.0007,
                "model": "qwen2.5-14b",
                "prompt_sha256": "ab" * 32,
                "error": None,
            }
            for retriever in retrievers
            for q in questions
        ]
    )
    judgments = pd.DataFrame(
        [
            {
                "query_id": q.id,
                "retriever": retriever,
                "k": 3,
                "judge": "groundedness",
                "score": 4.0,
                "supported_claims": json.dumps(["claim one"]),
                "unsupported_claims": "[]",
                "reasoning": "Supported by the first context.",
                "judge_model": "qwen2.5-14b",
                "judge_prompt_version": "groundedness-v1",
                "temperature": 0.0,
                "judge_input": json.dumps([{"role": "user", "content": "judge this " * 50}]),
                "replicate": 0,
                "error": None,
            }
            for retriever in retrievers
            for q in questions
        ]
    )
    return {
        "questions": questions_to_frame(questions),
        "metric_questions": metric_questions,
        "chunks": chunks,
        "results": results,
        "per_query": per_query,
        "answers": answers,
        "judgments": judgments,
    }


def sample_config(**dataset: str) -> dict:
    versions = (
        VersionTuple()
        .with_part("dataset", evalset_sha256="e" * 64, corpus_sha256="c" * 64, eval_set_version="sample@eeeeeeeeeeee")
        .with_part("dataset", **dataset)
        .with_part("index", chunker_version="chars-v1", chunk_size_chars=800, overlap_chars=100)
        .with_part("judge", model="qwen2.5-14b", prompt_version="groundedness-v1", temperature=0.0)
    )
    return run_config(versions, k_values=[1, 3, 5])


def write_sample_run(runs_dir: Path, seed: int = 0, **kwargs) -> Path:
    t = sample_tables(seed=seed)
    rows = results_rows(t["questions"], t["results"], t["chunks"], t["per_query"], t["answers"], t["judgments"])
    aggregate = aggregate_metrics(t["per_query"], t["metric_questions"], slices=("type",), n_boot=200)
    not_computed = pd.DataFrame({"metric": ["correctness"], "reason": ["no judge endpoint configured"]})
    kwargs.setdefault("now", NOW)
    kwargs.setdefault("description", None)
    return write_run(
        runs_dir, results=rows, metrics=metrics_document(aggregate, not_computed), config=sample_config(), **kwargs
    )


def test_results_rows_join_questions_chunks_answers_and_metrics() -> None:
    t = sample_tables()
    rows = list(results_rows(t["questions"], t["results"], t["chunks"], t["per_query"], t["answers"], t["judgments"]))
    # 12 questions x 2 retrievers x k in (1, 3, 5)
    assert len(rows) == 72
    row = next(r for r in rows if (r["query_id"], r["retriever"], r["k"]) == ("q04", "dense", 3))
    assert row["question"].startswith("What does chunk 4 say")
    assert row["type"] == "fact" and row["weight"] == 1.0
    expected = t["results"][(t["results"]["retriever"] == "dense") & (t["results"]["query_id"] == "q04")].head(3)
    assert [c["chunk_id"] for c in row["retrieved"]] == expected["chunk_id"].tolist()
    assert [c["rank"] for c in row["retrieved"]] == [1, 2, 3]
    first = row["retrieved"][0]
    chunk = t["chunks"].set_index("chunk_id").loc[first["chunk_id"]]
    assert (first["rel_path"], first["heading_path"], first["text"]) == (chunk["rel_path"], chunk["heading_path"], chunk["text"])
    assert first["page"] is None and first["score"] == 1.0 and first["score_lexical"] is None
    pq = t["per_query"]
    mine = pq[(pq["query_id"] == "q04") & (pq["retriever"] == "dense") & (pq["k"] == 3)]
    for metric, value in zip(mine["metric"], mine["value"]):
        assert row["metrics"][metric] == (None if np.isnan(value) else pytest.approx(value))
    assert row["answer"]["text"].startswith("The answer to q04")
    assert row["answer"]["citations"][0]["chunk_id"] == "c00"
    assert row["judgments"][0]["judge"] == "groundedness" and row["judgments"][0]["supported_claims"] == ["claim one"]
    assert row["latency_s"] == {"retrieval": 0.02, "generation": 0.5}
    assert row["cost_usd"] == {"generation": 0.0007}
    # k = 5 has no answers: retrieval only.
    row5 = next(r for r in rows if (r["query_id"], r["retriever"], r["k"]) == ("q04", "dense", 5))
    assert row5["answer"] is None and row5["judgments"] == [] and len(row5["retrieved"]) == 5
    # A negative question's precision is undefined: null, not NaN.
    negative = next(r for r in rows if r["query_id"] == "q02")
    assert negative["metrics"]["precision@k"] is None and negative["metrics"]["hit@k"] == 0.0
    # Questions without metrics or answers (outside a dev subset) get no rows.
    subset = t["per_query"][t["per_query"]["query_id"].isin(["q00", "q01"])]
    rows = list(results_rows(t["questions"], t["results"], t["chunks"], subset))
    assert [(r["query_id"], r["retriever"], r["k"]) for r in rows][:4] == [
        ("q00", "bm25", 1), ("q00", "bm25", 3), ("q00", "bm25", 5), ("q00", "dense", 1)
    ]
    assert len(rows) == 12 and all(r["answer"] is None for r in rows)


def test_results_are_written_as_they_are_made(tmp_path: Path) -> None:
    t = sample_tables()
    made = results_rows(t["questions"], t["results"], t["chunks"], t["per_query"], t["answers"], t["judgments"])
    first = next(made)  # a generator: rows are made one at a time, never a list of them all
    assert (first["query_id"], first["retriever"], first["k"]) == ("q00", "bm25", 1)
    rows = [first, *made]
    document = metrics_document(aggregate_metrics(t["per_query"], t["metric_questions"], n_boot=20),
                                pd.DataFrame(columns=["metric", "reason"]))
    written = [
        save_run(tmp_path / name, results=results, metrics=document, config=sample_config(), now=NOW)
        for name, results in (("list", rows), ("generator", (row for row in rows)))
    ]
    as_list, as_generator = ((path / RESULTS_FILE).read_bytes() for path in written)
    assert as_generator == as_list and len(as_list.splitlines()) == 72


def test_write_and_read_a_run(tmp_path: Path) -> None:
    path = write_sample_run(tmp_path, description="baseline: bm25 and dense")
    assert path == tmp_path / "20251218_063617"
    assert sorted(p.name for p in path.iterdir()) == sorted([RESULTS_FILE, METRICS_FILE, CONFIG_FILE, SUMMARY_FILE,
                                                             JUDGE_INPUTS_FILE])
    run = read_run(path)
    # Every judge input whole beside the cut results.jsonl, each the one its judgement's digest names.
    kept = read_judge_inputs(path)
    digests = {(r["query_id"], r["retriever"], int(r["k"]), j["judge"], j.get("replicate", 0)): j["judge_input_sha256"]
               for r in run.results for j in r.get("judgments") or [] if j.get("judge_input_sha256")}
    assert kept and {key: judge_input_sha256(text) for key, text in kept.items()} == digests
    assert run.run_id == "20251218_063617" and run.created_at == "2025-12-18T06:36:17Z"
    assert len(run.results) == 72 == len((path / RESULTS_FILE).read_text(encoding="utf-8").splitlines())
    assert run.metrics["run"] == {
        "run_id": "20251218_063617",
        "created_at": "2025-12-18T06:36:17Z",
        "description": "baseline: bm25 and dense",
        "previous_run_id": None,
    }
    assert run.metrics["not_computed"] == [{"metric": "correctness", "reason": "no judge endpoint configured"}]
    assert run.config == sample_config()
    aggregate = run.aggregate_frame()
    hit = aggregate[(aggregate["retriever"] == "bm25") & (aggregate["k"] == 5) & (aggregate["slice"] == "all")
                    & (aggregate["metric"] == "hit@k")]
    per_query = run.per_query_frame()
    values = per_query[(per_query["retriever"] == "bm25") & (per_query["k"] == 5) & (per_query["metric"] == "hit@k")]
    assert hit["value"].item() == pytest.approx(values["value"].mean())
    stages = run.stage_frame()
    assert stages.groupby("stage").size().to_dict() == {"retrieval": 24, "generation": 24}
    assert "baseline: bm25 and dense" in run.summary
    assert "chunk_size_chars: 800, overlap_chars: 100" in run.summary
    assert "| retriever | k | hit@k |" in run.summary
    assert "- correctness: no judge endpoint configured" in run.summary


def test_run_ids_are_utc_timestamps_with_suffixes(tmp_path: Path) -> None:
    first = write_sample_run(tmp_path)
    second = write_sample_run(tmp_path)
    third = write_sample_run(tmp_path)
    assert [p.name for p in (first, second, third)] == ["20251218_063617", "20251218_063617-2", "20251218_063617-3"]
    moscow = write_sample_run(tmp_path, now=datetime.fromisoformat("2025-12-18T12:00:00+03:00"))
    assert moscow.name == "20251218_090000"
    assert re.fullmatch(r"\d{8}_\d{6}", write_sample_run(tmp_path / "now", now=None).name)
    with pytest.raises(FileExistsError):
        write_sample_run(tmp_path, run_id="20251218_063617")
    with pytest.raises(ValueError, match="run_id"):
        write_sample_run(tmp_path, run_id="../escape")


def test_text_fields_are_cut_to_200_characters_unless_full_text(tmp_path: Path) -> None:
    long_id = "q-" + "x" * 300
    row = {
        "query_id": long_id,
        "question": "Q" * 500,
        "retriever": "bm25",
        "k": 1,
        "retrieved": [{"chunk_id": "c" * 250, "text": "é" * 201, "heading_path": "short"}],
        "answer": {"text": "A" * 200},
        "judgments": [{"judge_input": [{"role": "user", "content": "J" * 1000}]}],
        "metrics": {"hit@k": 1.0},
    }
    metrics = {"aggregate": []}
    cut = read_run(write_run(tmp_path, results=[row], metrics=metrics, config={}, run_id="cut")).results[0]
    assert cut["question"] == "Q" * 199 + "…" and len(cut["question"]) == 200
    assert cut["retrieved"][0]["text"] == "é" * 199 + "…"
    assert cut["judgments"][0]["judge_input"][0]["content"] == "J" * 199 + "…"
    assert cut["answer"]["text"] == "A" * 200  # exactly 200: kept
    assert cut["retrieved"][0]["heading_path"] == "short"
    # Identifiers are never cut: runs are joined on them.
    assert cut["query_id"] == long_id and cut["retrieved"][0]["chunk_id"] == "c" * 250
    full = read_run(
        write_run(tmp_path, results=[row], metrics=metrics, config={}, run_id="full", store_full_text=True)
    ).results[0]
    assert full["question"] == "Q" * 500 and full["judgments"][0]["judge_input"][0]["content"] == "J" * 1000


def test_secret_looking_keys_never_reach_config_json(tmp_path: Path) -> None:
    config = {
        **sample_config(),
        "llm": {
            "base_url": "http://localhost:8081/v1",
            "model": "qwen2.5-14b",
            "api_key_env": "OPENAI_API_KEY",
            "max_tokens": 512,
            "api_key": "sk-live-123",
            "OPENAI_API_KEY": "sk-live-456",
            "auth": {"Bearer_Token": "tok-789", "client_secret": "sec-000", "user": "eval"},
        },
        "endpoints": [{"name": "sut", "password": "hunter2", "url": "http://sut"}],
        "db_password": "pw-111",
    }
    path = write_run(tmp_path, results=[], metrics={"aggregate": []}, config=config, run_id="secrets")
    text = (path / CONFIG_FILE).read_text(encoding="utf-8")
    for secret in ("sk-live-123", "sk-live-456", "tok-789", "sec-000", "hunter2", "pw-111"):
        assert secret not in text
        assert secret not in (path / SUMMARY_FILE).read_text(encoding="utf-8")
    written = json.loads(text)
    assert written["llm"] == {
        "base_url": "http://localhost:8081/v1",
        "model": "qwen2.5-14b",
        "api_key_env": "OPENAI_API_KEY",  # the variable's name, not its value
        "max_tokens": 512,
        "auth": {"user": "eval"},
    }
    assert written["endpoints"] == [{"name": "sut", "url": "http://sut"}]
    assert "db_password" not in written and written["version_tuple"] == sample_config()["version_tuple"]


def test_a_failed_write_leaves_no_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    good = {"query_id": "q1", "question": "fine", "retriever": "bm25", "k": 1, "metrics": {}}
    bad = {**good, "query_id": "q2", "answer": object()}  # not JSON: fails half-way through results.jsonl
    with pytest.raises(TypeError):
        write_run(runs, results=[good] * 50 + [bad], metrics={"aggregate": []}, config={}, now=NOW)
    assert list(runs.iterdir()) == []
    assert latest_run(runs) is None
    with pytest.raises(InputError, match="aggregate"):
        write_run(runs, results=[good], metrics={}, config={}, now=NOW)
    assert list(runs.iterdir()) == []


def test_latest_run_is_the_last_created_complete_run(tmp_path: Path) -> None:
    assert latest_run(tmp_path / "missing") is None
    assert latest_run(tmp_path) is None
    write_sample_run(tmp_path, now=NOW)
    later = write_sample_run(tmp_path, now=datetime(2025, 12, 19, tzinfo=timezone.utc))
    write_sample_run(tmp_path, now=datetime(2025, 12, 17, tzinfo=timezone.utc))
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / ".20251230_000000.abc.tmp").mkdir()
    assert latest_run(tmp_path) == later
    tenth = [write_sample_run(tmp_path, now=datetime(2025, 12, 20, tzinfo=timezone.utc)) for _ in range(10)][-1]
    assert tenth.name == "20251220_000000-10" and latest_run(tmp_path) == tenth


def test_summary_compares_with_the_previous_run(tmp_path: Path) -> None:
    first = write_sample_run(tmp_path, seed=0)
    second = write_sample_run(tmp_path, seed=1, previous=first)
    run = read_run(second)
    assert run.metrics["run"]["previous_run_id"] == first.name
    assert f"## Change against run {first.name}" in run.summary
    assert "### Metric deltas" in run.summary and "### Top regressions" in run.summary
    # Generated when no description is given.
    assert f"12 questions of sample@eeeeeeeeeeee, retrievers bm25, dense, k = 1, 3, 5, with answers; compared with run {first.name}." in run.summary


def test_read_run_names_every_problem(tmp_path: Path) -> None:
    with pytest.raises(InputError) as missing:
        read_run(tmp_path / "nothing")
    assert len(missing.value.problems) == 3
    path = write_sample_run(tmp_path)
    lines = (path / RESULTS_FILE).read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4][:-1]
    (path / RESULTS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (path / CONFIG_FILE).write_text("{", encoding="utf-8")
    with pytest.raises(InputError) as broken:
        read_run(path)
    where = sorted((Path(p.file).name, p.line) for p in broken.value.problems)
    assert where == [(CONFIG_FILE, 1), (RESULTS_FILE, 5)]


def test_metrics_document_writes_nan_as_null() -> None:
    aggregate = pd.DataFrame(
        {"retriever": ["bm25"], "k": [np.int64(5)], "slice": ["all"], "metric": ["hit@k"], "value": [0.5],
         "ci_low": [np.nan], "ci_high": [np.nan], "n": [np.int64(0)]}
    )
    document = metrics_document(aggregate, operational={"errors": np.int64(2)})
    assert document == {
        "aggregate": [{"retriever": "bm25", "k": 5, "slice": "all", "metric": "hit@k", "value": 0.5,
                       "ci_low": None, "ci_high": None, "n": 0}],
        "operational": {"errors": 2},
    }
    json.dumps(document, allow_nan=False)
    with pytest.raises(InputError, match="ci_low"):
        metrics_document(aggregate.drop(columns=["ci_low"]))
