"""`rag-eval evaluate` on a BEIR folder: JSON aggregates, a per-query table, TREC files that trec_eval agrees with,
and clear errors for bad input."""

import json
import random
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from rag_eval_assets.cli import main
from rag_eval_assets_tests.stored_tables import stored_table

TOPICS = {
    "wing": "wing lift airfoil camber chord",
    "engine": "engine thrust turbine compressor fuel",
    "heat": "heat transfer boundary layer temperature",
    "shock": "shock wave supersonic mach number",
    "flutter": "flutter vibration panel aeroelastic",
}


def _beir(root: Path) -> Path:
    """A small BEIR collection: 5 topics x 6 documents, one query per topic, graded qrels."""
    rng = random.Random(7)
    root.mkdir()
    docs, qrels = [], []
    for t, (topic, words) in enumerate(TOPICS.items()):
        vocab = words.split()
        for i in range(6):
            body = " ".join(rng.choice(vocab + ["the", "of", "flow", "model"]) for _ in range(40))
            docs.append({"_id": f"{topic}-{i}", "title": f"{topic} study {i}", "text": body})
            if i < 3:
                qrels.append((f"q{t}", f"{topic}-{i}", 2 if i == 0 else 1))
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": f"q{t}", "text": f"{topic} {TOPICS[topic].split()[0]}"} for t, topic in enumerate(TOPICS)]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels))
    return root


def _evaluate(tmp_path: Path, corpus: Path, evalset: Path, *extra: str) -> int:
    return main(["evaluate", "--corpus", str(corpus), "--evalset", str(evalset), "--out", str(tmp_path / "out"),
                 "--language", "en", *extra])


def test_beir_folder_evaluates_at_document_level_and_matches_trec_eval(tmp_path):
    beir = _beir(tmp_path / "beir")
    assert _evaluate(tmp_path, beir, beir, "--retrievers", "bm25", "--k", "1,3,5,10") == 0
    out = tmp_path / "out"
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["level"] == "doc"
    chunks = stored_table(out / "store" / "assets", "chunks")
    assert len(chunks) == 30 and chunks["doc_id"].is_unique  # one chunk per document, as BEIR embeds them
    per_query = pd.read_parquet(out / "per_query.parquet")
    assert set(per_query["query_id"]) == {f"q{t}" for t in range(len(TOPICS))}

    qrels, run = {}, {}
    for line in (out / "qrels.trec").read_text().splitlines():
        q, _, d, g = line.split()
        qrels.setdefault(q, {})[d] = int(g)
    for line in (out / "run.bm25.trec").read_text().splitlines():
        q, _, d, _, score, name = line.split()
        assert name == "bm25"
        run.setdefault(q, {})[d] = float(score)
    assert set(qrels["q0"]) == {"wing-0", "wing-1", "wing-2"}  # document ids, not chunk ids
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "P.5", "map_cut.10"}).evaluate(run)
    mean = {m: sum(v[m] for v in measures.values()) / len(measures) for m in ("ndcg_cut_10", "P_5", "map_cut_10")}
    ours = summary["metrics"]["bm25"]
    assert ours["ndcg@10"] == pytest.approx(mean["ndcg_cut_10"], abs=1e-6)
    assert ours["precision@5"] == pytest.approx(mean["P_5"], abs=1e-6)
    assert ours["map@10"] == pytest.approx(mean["map_cut_10"], abs=1e-6)
    assert ours["ndcg@10"] > 0.5  # the topics are separable: bm25 must find them
    (run_dir,) = (out / "runs").iterdir()  # the same run directory the pipeline writes
    assert {p.name for p in run_dir.iterdir()} >= {"results.jsonl", "metrics.json", "config.json", "summary.md",
                                                   "report.html"}


def test_unknown_retriever_names_the_key(tmp_path, capsys):
    beir = _beir(tmp_path / "beir")
    assert _evaluate(tmp_path, beir, beir, "--retrievers", "bm25,splade") == 2
    assert "retrievers[1]" in capsys.readouterr().err


def test_evalset_naming_absent_documents_lists_the_ids(tmp_path, capsys):
    beir = _beir(tmp_path / "beir")
    with (beir / "qrels.tsv").open("a") as f:
        f.write("q1\tno-such-doc\t1\n")
    assert _evaluate(tmp_path, beir, beir, "--retrievers", "bm25") == 2  # an input error
    err = capsys.readouterr().err
    assert f"{beir / 'queries.jsonl'}:2: field 'qrels'" in err and "no-such-doc" in err


def test_empty_corpus_is_named(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    beir = _beir(tmp_path / "beir")
    assert _evaluate(tmp_path, empty, beir, "--retrievers", "bm25") == 2
    assert str(empty) in capsys.readouterr().err


def test_missing_model_names_the_config_key(tmp_path, capsys):
    beir = _beir(tmp_path / "beir")
    code = _evaluate(tmp_path, beir, beir, "--retrievers", "dense", "--dense-model", "org/not-installed-model")
    assert code == 1
    out = capsys.readouterr().out
    assert "retrieval.dense.model" in out and "org/not-installed-model" in out and "not available offline" in out


def test_evaluate_runs_from_a_directory_without_a_configuration(tmp_path, monkeypatch):
    beir = _beir(tmp_path / "beir")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("RAG_EVAL_CONFIG", raising=False)
    assert _evaluate(tmp_path, beir, beir, "--retrievers", "bm25", "--k", "5") == 0
    assert (tmp_path / "out" / "metrics.json").is_file()
