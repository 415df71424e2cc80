"""BM25 at scale: index build time and peak memory, and query throughput, on synthetic corpora of 100k, 300k and
1M chunks.

The corpus is generated, deterministically from --seed: a vocabulary of --vocab words whose frequencies follow
Zipf's law (exponent 1.0, as in natural text) and chunks of 100-150 terms, the length of an 800-character chunk of
English after stopword removal. Queries are 3-6 terms drawn from the same law without its 100 most frequent words
(the ones an analyzer's stop list removes). The index is built by BM25Index.build, the pipeline's own path, fed one
chunk's term list at a time (a generator), and 1,000 queries are answered by BM25Index.search at depth 10.

Every size runs in a fresh subprocess, so its peak RSS (VmHWM from /proc/self/status, read by that process at
the end) is its own: generator, build, index and search together.

    .venv/bin/python benchmarks/scale.py [--sizes 100000,300000,1000000] [--queries 1000] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

SIZES = (100_000, 300_000, 1_000_000)
VOCAB = 500_000
CHUNK_TERMS = (100, 150)
QUERY_TERMS = (3, 6)
STOP_RANKS = 100
MAX_PEAK_GB = 8.0
# Chunks generated per numpy call: amortises the sampling without holding more than a few MB of term ids.
_GENERATE_BATCH = 10_000


def vocabulary(size: int) -> np.ndarray:
    """`size` distinct lowercase words ("ba", "bb", ...; bijective base 26 with a leading "b"), as an object array
    so that term lists share the word objects instead of allocating new strings."""
    letters = string.ascii_lowercase
    words = []
    for i in range(size):
        word = ""
        i += 1
        while i:
            i, digit = divmod(i - 1, 26)
            word = letters[digit] + word
        words.append("b" + word)
    return np.array(words, dtype=object)


def _zipf_cdf(size: int, skip: int = 0) -> np.ndarray:
    weights = 1.0 / np.arange(1 + skip, size + 1, dtype=np.float64)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def synthetic_chunks(n: int, words: np.ndarray, seed: int) -> Iterator[list[str]]:
    """`n` chunks as term lists, generated lazily."""
    rng = np.random.default_rng(seed)
    cdf = _zipf_cdf(len(words))
    for start in range(0, n, _GENERATE_BATCH):
        lengths = rng.integers(CHUNK_TERMS[0], CHUNK_TERMS[1] + 1, size=min(_GENERATE_BATCH, n - start))
        ids = np.minimum(np.searchsorted(cdf, rng.random(int(lengths.sum()))), len(words) - 1)
        terms = words[ids]
        for a, b in zip(np.cumsum(lengths) - lengths, np.cumsum(lengths)):
            yield terms[a:b].tolist()


def synthetic_queries(n: int, words: np.ndarray, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed + 1)
    cdf = _zipf_cdf(len(words), STOP_RANKS)
    lengths = rng.integers(QUERY_TERMS[0], QUERY_TERMS[1] + 1, size=n)
    ids = np.minimum(np.searchsorted(cdf, rng.random(int(lengths.sum()))), len(words) - 1 - STOP_RANKS) + STOP_RANKS
    terms = words[ids].tolist()
    return [terms[a:b] for a, b in zip(np.cumsum(lengths) - lengths, np.cumsum(lengths))]


def peak_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024**2
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def measure(n_chunks: int, n_queries: int, vocab: int, seed: int) -> dict:
    """One size, in this process: generate + build, then search."""
    from rag_eval_assets.retrieval.bm25 import BM25Index

    words = vocabulary(vocab)
    queries = synthetic_queries(n_queries, words, seed)
    start = time.perf_counter()
    index = BM25Index.build(synthetic_chunks(n_chunks, words, seed))
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    rankings = index.search(queries, 10)
    search_s = time.perf_counter() - start
    return {
        "chunks": n_chunks,
        "terms": len(index.terms),
        "postings": int(index.weights.nnz),
        "index_mb": (index.weights.data.nbytes + index.weights.indices.nbytes + index.weights.indptr.nbytes) / 2**20,
        "build_s": build_s,
        "queries": n_queries,
        "search_s": search_s,
        "queries_per_s": n_queries / search_s,
        "answered": sum(1 for r in rankings if r),
        "peak_rss_gb": peak_rss_gb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chunk counts, comma-separated")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--vocab", type=int, default=VOCAB)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: measure one size
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.queries, args.vocab, args.seed)))
        return 0

    rows = []
    print(f"{'chunks':>10} {'terms':>9} {'postings':>12} {'index MB':>9} {'build s':>8} {'queries/s':>10} "
          f"{'peak RSS GB':>12}", flush=True)
    for n in (int(s) for s in args.sizes.split(",")):
        command = [sys.executable, __file__, "--one", str(n), "--queries", str(args.queries), "--vocab",
                   str(args.vocab), "--seed", str(args.seed)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-4000:]}")
        row = json.loads(done.stdout.splitlines()[-1])
        rows.append(row)
        print(f"{row['chunks']:>10,} {row['terms']:>9,} {row['postings']:>12,} {row['index_mb']:>9.0f} "
              f"{row['build_s']:>8.1f} {row['queries_per_s']:>10.1f} {row['peak_rss_gb']:>12.2f}", flush=True)
        if row["peak_rss_gb"] > MAX_PEAK_GB:
            print(f"  over the {MAX_PEAK_GB} GB target", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0 if all(row["peak_rss_gb"] <= MAX_PEAK_GB for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
