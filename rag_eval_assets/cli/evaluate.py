"""`rag-eval evaluate`, `benchmark` and `score`: collections and answers given on the command line, each run in an
output folder of its own (evaluate and benchmark through the whole pipeline, score on the answers alone)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from rag_eval_assets.cli.pipeline import run_and_read
from rag_eval_assets.cli.run import add_spot_check

WHOLE_DOCUMENT = 10_000_000  # chunk_size_chars larger than any document: one chunk per document


def _write_config(folder: Path, config: dict) -> Path:
    """`config` as the rag_eval.yaml of `folder`, which the pipeline run into that folder reads."""
    config_file = folder / "rag_eval.yaml"
    config_file.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return config_file


def _evaluate(args: argparse.Namespace) -> int:
    from rag_eval_assets.corpus.gold import resolve_gold
    from rag_eval_assets.evalset.load import load_evalset
    from rag_eval_assets.generation.settings import spot_check
    from rag_eval_assets.metrics.trec import write_trec_qrels, write_trec_run

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    corpus, evalset = Path(args.corpus).resolve(), Path(args.evalset).resolve()
    is_beir = (corpus / "corpus.jsonl").is_file()
    level = args.level or ("doc" if is_beir else "chunk")
    config = {
        "storage_dir": args.storage_dir or str(out / "store"),
        "corpus": {"id": args.corpus_id or corpus.name, "path": str(corpus), "language": args.language},
        "evalset": {"name": args.evalset_name or evalset.stem, "path": str(evalset)},
        "retrievers": args.retrievers.split(","),
        "k_values": [int(k) for k in args.k.split(",")],
        "retrieval": {"level": level, "dense": {"model": args.dense_model}},
        "runs_dir": str(out / "runs"),
    }
    if args.spot_check:
        config.update(spot_check(args.spot_check))
    ks = config["k_values"]
    config["answering"] = {"k_values": [k for k in (5, 10) if k <= max(ks)] or [max(ks)]}
    if args.chunk_size:
        config["chunking"] = {"chunk_size_chars": args.chunk_size, "overlap_chars": args.overlap}
    elif is_beir:
        # BEIR and MTEB embed each document whole: one chunk per document keeps the figures comparable
        # (measured: all-MiniLM-L6-v2 on XQuAD-ru gives MTEB's 0.2161 nDCG@10 whole, 0.157 chunked at 800).
        config["chunking"] = {"chunk_size_chars": WHOLE_DOCUMENT, "overlap_chars": 0}

    def read(settings, load) -> dict:
        return {
            "aggregate": load("retrieval_metrics"),
            "per_query": load("retrieval_metrics_per_query"),
            "results": {r: load("retrieval_results", partition_key=r) for r in settings.retrievers},
            "chunks": load("chunks"),
            "documents": load("corpus_documents"),
        }

    outcome, settings, tables = run_and_read(_write_config(out, config), out / "dagster", args.verbose, read=read)
    if not outcome.ok:
        print(outcome.where())  # why it failed is said first (cli/pipeline.py)
        return outcome.exit_code

    tables["per_query"].to_parquet(out / "per_query.parquet", index=False)
    aggregate = tables["aggregate"]
    overall = aggregate[aggregate["slice"] == "all"]
    summary = {
        "corpus": str(corpus),
        "evalset": str(evalset),
        "level": level,
        "chunk_size_chars": settings.chunking.chunk_size_chars,
        "overlap_chars": settings.chunking.overlap_chars,
        "metrics": {
            retriever: {
                f"{metric.replace('@k', '')}@{k}" if "@k" in metric else metric: round(float(value), 6)
                for metric, k, value in zip(group["metric"], group["k"], group["value"])
            }
            for retriever, group in overall.groupby("retriever")
        },
        "aggregate": aggregate.to_dict("records"),
    }
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for retriever, table in tables["results"].items():
        write_trec_run(table, out / f"run.{retriever}.trec", run_name=retriever, level=level)
    questions = load_evalset(evalset)
    doc_ids = tables["documents"]["doc_id"].unique().tolist()
    write_trec_qrels(resolve_gold(questions, tables["chunks"], doc_ids), out / "qrels.trec", level=level)
    for retriever, metrics in summary["metrics"].items():
        shown = {m: v for m, v in metrics.items() if m.startswith(("ndcg@10", "recall@10", "mrr@10", "hit@10"))}
        print(f"{retriever}: {shown}")
    print(f"metrics: {out / 'metrics.json'}\nper-query table: {out / 'per_query.parquet'}")
    print(outcome.where())
    return 0


def _benchmark(args: argparse.Namespace) -> int:
    """Seed 000 section 6: every dataset through the whole pipeline, then one weighted score over them."""
    from rag_eval_assets.runs.benchmark import aggregate_benchmark, load_benchmark_config, require_rules

    bench = load_benchmark_config(args.config_file)
    require_rules(bench, args.config_file)
    out = Path(args.out).resolve()
    cells: dict[tuple[str, int], list[dict]] = {}
    for dataset in bench.datasets:
        target = out / dataset.name
        target.mkdir(parents=True, exist_ok=True)
        config = {
            "storage_dir": str(target / "store"),
            "runs_dir": str(target / "runs"),
            "corpus": {"id": dataset.name, "path": str(dataset.corpus), "language": args.language},
            "evalset": {"name": dataset.name, "path": str(dataset.evalset)},
            "retrievers": args.retrievers.split(","),
            "k_values": [int(k) for k in args.k.split(",")],
            "answering": {"k_values": [int(k) for k in args.k.split(",")]},
        }
        outcome, _, table = run_and_read(_write_config(target, config), target / "dagster", args.verbose,
                                         read=lambda settings, load: load("answer_metrics"))
        if not outcome.ok:
            print(f"dataset {dataset.name}: {outcome.failure_line()}\n{outcome.where()}", file=sys.stderr)
            return outcome.exit_code
        rows = table[(table["metric"] == "weighted_score") & (table["slice"] == "all")]
        for row in rows.itertuples():
            cells.setdefault((row.retriever, int(row.k)), []).append(
                {"name": dataset.name, "weight": dataset.weight, "weighted_score": float(row.value), "n": int(row.n)}
            )
    report = {
        "name": bench.name,
        "cells": [
            {"retriever": retriever, "k": k, **aggregate_benchmark(per_dataset)}
            for (retriever, k), per_dataset in sorted(cells.items())
        ],
    }
    (out / "benchmark.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for cell in report["cells"]:
        print(f"{cell['retriever']} k={cell['k']}: summary.weighted_score {cell['summary']['weighted_score']:.4f} "
              + ", ".join(f"{d['name']} {d['weighted_score']:.4f}" for d in cell["datasets"]))
    print(f"benchmark: {out / 'benchmark.json'}")
    return 0


def _score(args: argparse.Namespace) -> int:
    from rag_eval_assets.evalset.freeze import evalset_sha256
    from rag_eval_assets.evalset.load import load_evalset
    from rag_eval_assets.generation.settings import DEFAULT_CITATION_PATTERN
    from rag_eval_assets.metrics.answers import load_answers, score_answers

    questions = load_evalset(args.evalset)
    answers = load_answers(args.answers, {q.id for q in questions})
    encoder = None
    if args.embedding_model:
        from rag_eval_assets.retrieval.encoders import get_encoder

        encoder = get_encoder(args.embedding_model)
    per_question, summary = score_answers(questions, answers, encoder, args.citation_pattern or DEFAULT_CITATION_PATTERN)
    summary["questions_sha256"] = evalset_sha256(args.evalset)
    if args.corpus:
        from rag_eval_assets.corpus.load import corpus_sha256

        summary["pdf_sha256"] = corpus_sha256(args.corpus)  # seed 000's name, over every file of the corpus
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    per_question.to_parquet(out / "per_question.parquet", index=False)
    wide = per_question.pivot_table(index="query_id", columns="metric", values="value", dropna=False).reset_index()
    wide.to_csv(out / "per_question.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if summary["weighted_score"] is None:
        print(f"weighted_score: not applicable (no question has seed 000 rules); {summary['n']} of "
              f"{summary['n_questions']} questions answered")
    else:
        print(f"weighted_score: {summary['weighted_score']:.4f} over the questions with seed 000 rules; "
              f"{summary['n']} of {summary['n_questions']} questions answered")
    print(f"per-question scores: {out / 'per_question.parquet'} (and .csv)\nsummary: {out / 'summary.json'}")
    return 0


def add_evaluate(sub, parents: list[argparse.ArgumentParser]) -> None:
    ev = sub.add_parser("evaluate", parents=parents,
                        help="evaluate retrievers on a corpus and evalset (BEIR folders included)")
    ev.add_argument("--corpus", required=True, help="a BEIR folder (corpus.jsonl) or a folder of md/pdf/txt files")
    ev.add_argument("--evalset", required=True, help="an evalset file or a BEIR folder (queries.jsonl + qrels)")
    ev.add_argument("--retrievers", default="bm25,dense,hybrid")
    ev.add_argument("--k", default="1,3,5,10,20")
    ev.add_argument("--out", required=True, help="output directory")
    ev.add_argument("--storage-dir", help="where the tables go: a directory or an fsspec URL (default: OUT/store)")
    ev.add_argument("--level", choices=("chunk", "doc"), help="default: doc for BEIR corpora, chunk otherwise")
    ev.add_argument("--language", default="multi", help="bm25 analyzer: en, ru, zh or multi")
    ev.add_argument("--dense-model", default="all-MiniLM-L6-v2")
    ev.add_argument("--chunk-size", type=int,
                    help="chunk_size_chars (default: one chunk per document for BEIR corpora, else 800)")
    ev.add_argument("--overlap", type=int, default=100, help="overlap_chars with --chunk-size")
    ev.add_argument("--corpus-id", help="corpus id in chunk ids (default: the folder name)")
    ev.add_argument("--evalset-name", help="evalset version name (default: the file or folder name)")
    add_spot_check(ev)
    ev.set_defaults(func=_evaluate)


def add_score(sub, parents: list[argparse.ArgumentParser]) -> None:
    sc = sub.add_parser("score", parents=parents, help="score answers produced elsewhere against an evalset")
    sc.add_argument("--evalset", required=True, help="an evalset file in any supported format")
    sc.add_argument("--answers", required=True, help="JSONL: id, answer, optional contexts [{source_path, text}]")
    sc.add_argument("--out", required=True, help="output directory")
    sc.add_argument("--corpus", help="the corpus the answers came from (its sha256 goes into the summary)")
    sc.add_argument("--embedding-model", help="compute semantic similarity with this model (e.g. all-MiniLM-L6-v2)")
    sc.add_argument("--citation-pattern", help="regex for a page citation (default: стр. N)")
    sc.set_defaults(func=_score)


def add_benchmark(sub, parents: list[argparse.ArgumentParser]) -> None:
    bm = sub.add_parser("benchmark", parents=parents,
                        help="several datasets (corpus + evalset each), one aggregated weighted score")
    bm.add_argument("--config-file", required=True, help="YAML/JSON: name, datasets [{name, corpus, evalset, weight}]")
    bm.add_argument("--out", required=True, help="output directory (one sub-directory per dataset)")
    bm.add_argument("--retrievers", default="bm25,dense,hybrid")
    bm.add_argument("--k", default="5", help="k values of the answer grid (and of retrieval)")
    bm.add_argument("--language", default="multi", help="bm25 analyzer: en, ru, zh or multi")
    bm.set_defaults(func=_benchmark)
