"""Encoder backends against the fp32 torch path: texts/s on this CPU and nDCG@10 of dense retrieval.

Every backend runs the same model (the packaged all-MiniLM-L6-v2) through `get_encoder(..., backend=...)`:

1. Speed: texts/s encoding 800-character chunk texts (the default chunking) of each collection, no cache. The
   backends are timed in rounds, every round timing each backend once in a rotated order, so load changes on a
   shared machine hit all alike; each figure is the median over --repeats rounds, and each ratio compares it with
   the torch median of the same rounds.
2. Quality: nDCG@10 of dense retrieval with each backend on ../shared/data/{cranfield,xquad_ru}, document level as
   BEIR (one chunk per document, DenseIndex + retrieval_metrics, as benchmarks/retrieval.py and the CLI do). MiniLM
   is English-only, so on XQuAD-ru the figure measures agreement between backends, not a good Russian retriever.

Target: an opt-in backend with >= 2x the texts/s of torch on both collections' texts and nDCG@10 within 0.005 of
torch on both collections.

    .venv/bin/python benchmarks/encoders.py [--texts N] [--repeats N] [--queries N] [--out FILE.json]

Exports go to a temporary directory (their first-use cost is reported); nothing in the repository changes.
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
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.corpus.load import BEIR_CORPUS, load_corpus
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.tables import questions_for_metrics
from rag_eval_assets.metrics.retrieval import retrieval_metrics
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.encoders import BACKENDS, DEFAULT_MODEL, SentenceTransformerEncoder, get_encoder
from rag_eval_assets.retrieval.retrievers import collapse_to_documents

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
COLLECTIONS = ("cranfield", "xquad_ru")
REFERENCE = "torch"
TOP = 10
DEPTH = 100
# Chunk size from which every document of these collections is one chunk (BEIR embeds documents whole).
WHOLE_DOCUMENT = ChunkerParams(chunk_size_chars=10_000_000, overlap_chars=0)
TARGET_SPEEDUP = 2.0
TARGET_NDCG_DELTA = 0.005


def say(message: str) -> None:
    print(message, flush=True)


def spread(texts: list[str], n: int) -> list[str]:
    """`n` texts taken evenly across the list (the first n would all come from the first documents)."""
    if n >= len(texts):
        return texts
    return [texts[i] for i in np.linspace(0, len(texts) - 1, n).round().astype(int)]


def bench_speed(encoders: dict[str, SentenceTransformerEncoder], texts: list[str], repeats: int) -> dict[str, dict]:
    names = list(encoders)
    times: dict[str, list[float]] = {name: [] for name in names}
    for encoder in encoders.values():  # warm-up outside the timing: first batches pay one-off allocations
        encoder.encode(texts[:32], "passage")
    for round_ in range(repeats):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            start = time.perf_counter()
            encoders[name].encode(texts, "passage")
            times[name].append(time.perf_counter() - start)
    reference = statistics.median(times[REFERENCE])
    return {
        name: {"texts_per_s": len(texts) / statistics.median(t), "speed_ratio": reference / statistics.median(t),
               "seconds": t}
        for name, t in times.items()
    }


def dense_ndcg10(encoder: SentenceTransformerEncoder, folder: Path, queries: int | None) -> tuple[float, np.ndarray]:
    """Mean nDCG@10 at document level, and the document vectors (to compare backends)."""
    documents = load_corpus(folder)
    chunks = chunk_documents(documents, folder.name, WHOLE_DOCUMENT)
    questions = load_evalset(folder)[:queries]
    index = DenseIndex.build(chunks["text"].tolist(), encoder)
    rows = []
    for question, ranking in zip(questions, index.search([q.question for q in questions], DEPTH)):
        rows += [(question.id, rank, row, score) for rank, (row, score) in enumerate(ranking, 1)]
    frame = pd.DataFrame(rows, columns=["query_id", "rank", "row", "score"])
    frame["retriever"] = "dense"
    frame["chunk_id"] = chunks["chunk_id"].to_numpy()[frame["row"].to_numpy()]
    frame["doc_id"] = chunks["doc_id"].to_numpy()[frame["row"].to_numpy()]
    results = collapse_to_documents(frame.drop(columns="row"), DEPTH)
    gold = resolve_gold(questions, chunks, [d.doc_id for d in documents])
    metrics = retrieval_metrics(results, gold, questions_for_metrics(questions), ks=(TOP,), level="doc")
    ndcg = metrics[(metrics["metric"] == "ndcg@k") & (metrics["k"] == TOP)]["value"].mean()
    return float(ndcg), index.vectors


def report(figures: dict) -> str:
    speed, ndcg = figures["speed"], figures["ndcg10"]
    lines = [
        f"Encoder backends vs fp32 torch: {figures['model']} on {figures['cpu']} ({figures['threads']} torch threads); "
        f"speed on {figures['texts']} chunk texts per collection, medians of {figures['repeats']} alternating rounds; "
        f"ratio = torch time / backend time",
        "",
        f"{'backend':<10} {'model id':<52} {'load s':>8} "
        + " ".join(f"{c + ' texts/s':>19} {'ratio':>6}" for c in COLLECTIONS)
        + " " + " ".join(f"{'nDCG@10 ' + c:>18} {'delta':>8}" for c in COLLECTIONS)
        + f" {'min cos':>8} {'target':>7}",
    ]
    for backend, row in figures["backends"].items():
        cells = [f"{backend:<10} {row['model_id']:<52} {row['first_load_s']:>8.1f}"]
        cells += [f"{speed[c][backend]['texts_per_s']:>19.1f} {speed[c][backend]['speed_ratio']:>5.2f}x"
                  for c in COLLECTIONS]
        cells += [f"{ndcg[c][backend]['ndcg10']:>18.4f} {ndcg[c][backend]['delta']:>+8.4f}" for c in COLLECTIONS]
        cosine = min(ndcg[c][backend]["min_cosine_to_torch"] for c in COLLECTIONS)
        verdict = "-" if backend == REFERENCE else ("meets" if row["meets_target"] else "misses")
        lines.append(" ".join(cells) + f" {cosine:>8.4f} {verdict:>7}")
    lines += [
        "",
        f"target: >= {TARGET_SPEEDUP:.0f}x torch texts/s on both collections' texts and |nDCG@10 delta| <= "
        f"{TARGET_NDCG_DELTA} on both collections; min cos = the lowest cosine between a document's vector and its "
        "torch vector; load s = first use, export included",
        f"nDCG@10: document level, one chunk per document, {figures['queries']} queries",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=300, help="chunk texts per collection in the speed rounds")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (>= 3)")
    parser.add_argument("--queries", type=int, help="only the first N queries of each collection in the nDCG runs")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS,
                        help="backends to compare (torch, the reference, is always included)")
    parser.add_argument("--out", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error("--repeats must be >= 3")
    folders = {name: SHARED_DATA / name for name in COLLECTIONS}
    absent = [str(f) for f in folders.values() if not (f / BEIR_CORPUS).is_file()]
    if absent:
        parser.error(f"BEIR collections not found: {', '.join(absent)}")
    backends = [REFERENCE] + [b for b in args.backends if b != REFERENCE]

    with tempfile.TemporaryDirectory(prefix="rag-eval-encoders-") as cache_dir:
        encoders: dict[str, SentenceTransformerEncoder] = {}
        first_load: dict[str, float] = {}
        for backend in backends:
            say(f"loading {backend}")
            start = time.perf_counter()
            encoders[backend] = get_encoder(DEFAULT_MODEL, device="cpu", backend=backend, cache_dir=cache_dir)
            first_load[backend] = time.perf_counter() - start

        speed = {}
        for name, folder in folders.items():
            texts = spread(chunk_documents(load_corpus(folder), name, ChunkerParams())["text"].tolist(), args.texts)
            say(f"speed: {len(texts)} chunk texts of {name}, {args.repeats} rounds of {', '.join(backends)}")
            speed[name] = bench_speed(encoders, texts, args.repeats)

        ndcg: dict[str, dict] = {}
        for name, folder in folders.items():
            ndcg[name] = {}
            reference_vectors = None
            for backend in backends:
                say(f"nDCG@10: {name} with {backend}")
                value, vectors = dense_ndcg10(encoders[backend], folder, args.queries)
                if reference_vectors is None:
                    reference_vectors, reference_value = vectors, value
                ndcg[name][backend] = {"ndcg10": value, "delta": value - reference_value,
                                       "min_cosine_to_torch": float((vectors * reference_vectors).sum(1).min())}

    rows = {}
    for backend in backends:
        meets = backend != REFERENCE and all(
            speed[c][backend]["speed_ratio"] >= TARGET_SPEEDUP and abs(ndcg[c][backend]["delta"]) <= TARGET_NDCG_DELTA
            for c in COLLECTIONS
        )
        rows[backend] = {"model_id": encoders[backend].model_id, "first_load_s": first_load[backend],
                         "meets_target": meets}
    figures = {
        "model": DEFAULT_MODEL, "cpu": f"{os.cpu_count()} CPUs", "threads": torch.get_num_threads(),
        "texts": args.texts, "repeats": args.repeats, "queries": args.queries or "all",
        "backends": rows, "speed": speed, "ndcg10": ndcg,
    }
    print("\n" + report(figures))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
