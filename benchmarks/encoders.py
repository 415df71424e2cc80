"""Encoder backends against the fp32 torch path: texts/s on this CPU by text length, and nDCG@10 of dense retrieval.

Every backend runs the same model (the packaged all-MiniLM-L6-v2) through `get_encoder(..., backend=...)`:

1. Speed, by text length: texts/s encoding, with no cache,
   - short: queries of both collections (tens of characters, a few dozen tokens),
   - chunk: 800-character chunks (the default chunking) of both collections,
   - document: whole documents of 1,000-2,000 characters (Cranfield abstracts; most reach MiniLM's 256-token limit).
   The backends are timed in rounds, every round timing each backend once in a rotated order, so load changes on a
   shared machine hit all alike; each figure is the median over --repeats rounds, and each ratio compares it with
   the torch median of the same rounds.
2. Quality: nDCG@10 of dense retrieval with each backend on ../shared/data/{cranfield,xquad_ru}, document level as
   BEIR (one chunk per document, DenseIndex + retrieval_metrics, as benchmarks/retrieval.py and the CLI do). To keep
   the run to a few minutes each collection is subsampled to --docs documents taken evenly across it, with the
   queries that have a relevant document among them and their qrels restricted to them (--docs 0: all). The figure
   is for comparing backends, not a collection's published nDCG. MiniLM is English-only, so on XQuAD-ru it measures
   agreement between backends, not a good Russian retriever.

Target: an opt-in backend with >= 2x the texts/s of torch on the lengths users index (chunk and document) and nDCG@10
within 0.005 of torch on both collections.

    .venv/bin/python benchmarks/encoders.py [--texts N] [--repeats N] [--docs N] [--data DIR] [--out FILE.json]

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
import platform
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
LENGTHS = ("short", "chunk", "document")
# The lengths users index: the target is judged on these.
INDEXED = ("chunk", "document")
DOCUMENT_CHARS = (1_000, 2_000)
REFERENCE = "torch"
TOP = 10
DEPTH = 100
# Chunk size from which every document of these collections is one chunk (BEIR embeds documents whole).
WHOLE_DOCUMENT = ChunkerParams(chunk_size_chars=10_000_000, overlap_chars=0)
TARGET_SPEEDUP = 2.0
TARGET_NDCG_DELTA = 0.005


# What decides whether a backend can beat fp32 torch once the GEMMs dominate: int8 dot products (VNNI) and bf16
# arithmetic (AVX512-BF16, AMX) in hardware.
CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_features() -> str:
    """Which of CPU_FEATURES this (Linux) CPU has, from /proc/cpuinfo; "unknown" elsewhere."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return "unknown"
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.read_text().splitlines()
                  if line.startswith("flags")), [])
    return " ".join(f for f in CPU_FEATURES if f in flags) or "none of " + " ".join(CPU_FEATURES)


def say(message: str) -> None:
    print(message, flush=True)


def spread(items: list, n: int) -> list:
    """`n` items taken evenly across the list (the first n would all come from the first documents)."""
    if n <= 0 or n >= len(items):
        return items
    return [items[i] for i in np.linspace(0, len(items) - 1, n).round().astype(int)]


def texts_by_length(folders: dict[str, Path], n: int) -> dict[str, list[str]]:
    """`n` texts of each length class, drawn evenly from both collections (documents: Cranfield only, whose
    abstracts are the 1,000-2,000-character kind; XQuAD paragraphs are chunk-sized)."""
    queries, chunks = [], []
    for name, folder in folders.items():
        queries += spread([q.question for q in load_evalset(folder)], 4 * n // len(folders))
        chunk_texts = chunk_documents(load_corpus(folder), name, ChunkerParams())["text"].tolist()
        chunks += spread(chunk_texts, n // len(folders))
    whole = chunk_documents(load_corpus(folders["cranfield"]), "cranfield", WHOLE_DOCUMENT)["text"].tolist()
    documents = spread([t for t in whole if DOCUMENT_CHARS[0] <= len(t) <= DOCUMENT_CHARS[1]], n)
    return {"short": queries, "chunk": chunks, "document": documents}


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


def subsample(folder: Path, docs: int, target: Path) -> Path:
    """A BEIR copy of `folder` with `docs` documents taken evenly across it, the queries with a relevant document
    among them, and their qrels; `folder` itself when docs is 0 or covers the collection."""
    lines = (folder / BEIR_CORPUS).read_text(encoding="utf-8").splitlines()
    if docs <= 0 or docs >= len(lines):
        return folder
    kept = spread(lines, docs)
    ids = {json.loads(line)["_id"] for line in kept}
    header, *qrels = (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    qrels = [row for row in qrels if row.split("\t")[1] in ids]
    judged = {row.split("\t")[0] for row in qrels}
    queries = [q for q in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(q)["_id"] in judged]
    target.mkdir(parents=True)
    (target / BEIR_CORPUS).write_text("\n".join(kept) + "\n", encoding="utf-8")
    (target / "qrels.tsv").write_text("\n".join([header, *qrels]) + "\n", encoding="utf-8")
    (target / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    return target


def dense_ndcg10(encoder: SentenceTransformerEncoder, folder: Path) -> tuple[float, np.ndarray, int, int]:
    """Mean nDCG@10 at document level, the document vectors (to compare backends), and the documents and queries."""
    documents = load_corpus(folder)
    chunks = chunk_documents(documents, folder.name, WHOLE_DOCUMENT)
    questions = load_evalset(folder)
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
    return float(ndcg), index.vectors, len(documents), len(questions)


def report(figures: dict) -> str:
    speed, ndcg = figures["speed"], figures["ndcg10"]
    sizes = ", ".join(f"{length} {figures['lengths'][length]}" for length in LENGTHS)
    lines = [
        f"Encoder backends vs fp32 torch: {figures['model']} on {figures['cpu']} ({figures['threads']} torch threads); "
        f"texts/s by length, medians of {figures['repeats']} alternating rounds; ratio = torch time / backend time",
        f"texts per length: {sizes}",
        "",
        f"{'backend':<10} {'model id':<52} {'load s':>7} "
        + " ".join(f"{length + ' texts/s':>16} {'ratio':>6}" for length in LENGTHS)
        + " " + " ".join(f"{'nDCG@10 ' + c:>18} {'delta':>8}" for c in COLLECTIONS)
        + f" {'min cos':>8} {'target':>7}",
    ]
    for backend, row in figures["backends"].items():
        cells = [f"{backend:<10} {row['model_id']:<52} {row['first_load_s']:>7.1f}"]
        cells += [f"{speed[length][backend]['texts_per_s']:>16.1f} {speed[length][backend]['speed_ratio']:>5.2f}x"
                  for length in LENGTHS]
        cells += [f"{ndcg[c][backend]['ndcg10']:>18.4f} {ndcg[c][backend]['delta']:>+8.4f}" for c in COLLECTIONS]
        cosine = min(ndcg[c][backend]["min_cosine_to_torch"] for c in COLLECTIONS)
        verdict = "-" if backend == REFERENCE else ("meets" if row["meets_target"] else "misses")
        lines.append(" ".join(cells) + f" {cosine:>8.4f} {verdict:>7}")
    subsets = ", ".join(f"{c} {n['documents']} docs / {n['queries']} queries" for c, n in figures["ndcg_sets"].items())
    lines += [
        "",
        f"target: >= {TARGET_SPEEDUP:.0f}x torch texts/s on {' and '.join(INDEXED)} texts and |nDCG@10 delta| <= "
        f"{TARGET_NDCG_DELTA} on both collections; min cos = the lowest cosine between a document's vector and its "
        "torch vector; load s = first use, export included",
        f"nDCG@10: document level, one chunk per document, on {subsets}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=32,
                        help="chunk and document texts in the speed rounds (short: 4x as many queries)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (>= 3)")
    parser.add_argument("--docs", type=int, default=60, help="documents per collection in the nDCG runs (0: all)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS,
                        help="backends to compare (torch, the reference, is always included)")
    parser.add_argument("--data", type=Path, default=SHARED_DATA,
                        help="folder holding the BEIR collections (default: ../shared/data beside the repository)")
    parser.add_argument("--out", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error("--repeats must be >= 3")
    folders = {name: args.data / name for name in COLLECTIONS}
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

        samples = texts_by_length(folders, args.texts)
        speed = {}
        for length, texts in samples.items():
            say(f"speed: {len(texts)} {length} texts, {args.repeats} rounds of {', '.join(backends)}")
            speed[length] = bench_speed(encoders, texts, args.repeats)
            say("  " + ", ".join(f"{backend} {f['texts_per_s']:.1f}/s ({f['speed_ratio']:.2f}x)"
                                 for backend, f in speed[length].items()))

        ndcg: dict[str, dict] = {}
        ndcg_sets: dict[str, dict] = {}
        for name, folder in folders.items():
            folder = subsample(folder, args.docs, Path(cache_dir) / "subsets" / name)
            ndcg[name] = {}
            reference_vectors = None
            for backend in backends:
                say(f"nDCG@10: {name} with {backend}")
                value, vectors, documents, queries = dense_ndcg10(encoders[backend], folder)
                if reference_vectors is None:
                    reference_vectors, reference_value = vectors, value
                ndcg[name][backend] = {"ndcg10": value, "delta": value - reference_value,
                                       "min_cosine_to_torch": float((vectors * reference_vectors).sum(1).min())}
            ndcg_sets[name] = {"documents": documents, "queries": queries}

    rows = {}
    for backend in backends:
        meets = backend != REFERENCE and all(
            speed[length][backend]["speed_ratio"] >= TARGET_SPEEDUP for length in INDEXED
        ) and all(abs(ndcg[c][backend]["delta"]) <= TARGET_NDCG_DELTA for c in COLLECTIONS)
        rows[backend] = {"model_id": encoders[backend].model_id, "first_load_s": first_load[backend],
                         "meets_target": meets}
    figures = {
        "model": DEFAULT_MODEL,
        "cpu": f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}; {cpu_features()})",
        "threads": torch.get_num_threads(), "repeats": args.repeats, "docs": args.docs,
        "lengths": {length: f"{len(t)} (mean {statistics.mean(map(len, t)):.0f} chars)"
                    for length, t in samples.items()},
        "backends": rows, "speed": speed, "ndcg10": ndcg, "ndcg_sets": ndcg_sets,
    }
    print("\n" + report(figures))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
