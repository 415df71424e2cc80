"""Sweep benchmark: an 18-variant BM25 sweep (k1 0.6 / 0.9 / 1.2 x b 0.3 / 0.5 / 0.75 x chunk_size_chars 400 / 800)
on the shipped sample data as one `rag-eval run`, against the same 18 configurations as 18 separate runs (each its
variant alone, its chunking the top-level one, in a store and Dagster instance of its own), each timed as a separate
process on this machine.

The sweep builds two chunkings' chunks, gold labels and BM25 term counts once and runs 18 retrieval partitions over
them; the separate runs build those 18 times. Each variant's metrics in the sweep's run directory are checked equal
to its separate run's (every aggregate row, to the last digit). Exit status 1 when one differs.

    PYTHONPATH=. .venv/bin/python benchmarks/sweep.py [--out FILE.json]

Everything is written under a temporary directory; nothing in the repository changes.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag_eval_assets.retrieval.backend_choice import cpu_model
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets.runs.store import read_run

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
K1, B, SIZES = (0.6, 0.9, 1.2), (0.3, 0.5, 0.75), (400, 800)
OVERLAP = 100
GRID = "k_values: [1, 5, 10]\nanswering: {k_values: [5]}\n"
SWEEP = GRID + f"sweep: {{kind: bm25, k1: {list(K1)}, b: {list(B)}, " \
               f"chunking: [{', '.join(f'{{chunk_size_chars: {s}}}' for s in SIZES)}]}}\n"



def write_config(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "home").mkdir()
    path = directory / "rag_eval.yaml"
    path.write_text(f"storage_dir: {directory / 'store'}\ncorpus: {{id: sample, path: {SAMPLE / 'corpus'}}}\n"
                    f"evalset: {{name: sample_eval_set, path: {SAMPLE / 'evalsets' / 'eval_set.jsonl'}}}\n" + body,
                    encoding="utf-8")
    return path


def timed_run(config: Path) -> float:
    env = {**os.environ, "DAGSTER_HOME": str(config.parent / "home")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rag_eval_assets.cli", "--config", str(config), "run"], env=env,
                          capture_output=True, text=True, check=False, cwd=REPO)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"rag-eval run of {config} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds


def aggregate(config: Path, retriever: str) -> list[tuple]:
    (run,) = list_runs(config.parent / "store" / "runs")
    frame = read_run(run).aggregate_frame()
    frame = frame[frame["retriever"] == retriever].drop(columns=["retriever"])
    return sorted(map(tuple, frame.astype(str).values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-eval-sweep-") as tmp_name:
        tmp = Path(tmp_name)
        sweep = write_config(tmp / "sweep", SWEEP)
        sweep_s = timed_run(sweep)
        separate_s, differing = 0.0, []
        for i, (k1, b, size) in enumerate(itertools.product(K1, B, SIZES)):
            name = f"bm25_k1-{k1}_b-{b}_c{size}"
            alone = write_config(tmp / f"alone{i:02d}", GRID + f"chunking: {{chunk_size_chars: {size}, overlap_chars: "
                                 f"{OVERLAP}}}\nretrievers: {{{name}: {{kind: bm25, k1: {k1}, b: {b}}}}}\n")
            separate_s += timed_run(alone)
            if aggregate(sweep, name) != aggregate(alone, name):
                differing.append(name)
    figures = {
        "cpu": cpu_model(),
        "variants": len(K1) * len(B) * len(SIZES),
        "sweep_one_run_s": round(sweep_s, 1),
        "separate_runs_s": round(separate_s, 1),
        "separate_over_sweep": round(separate_s / sweep_s, 2),
        "variants_whose_metrics_differ": differing,
    }
    print(f"CPU: {figures['cpu']}")
    print(f"18-variant BM25 sweep, one rag-eval run: {figures['sweep_one_run_s']} s")
    print(f"the same 18 variants as 18 separate runs: {figures['separate_runs_s']} s")
    print(f"ratio: {figures['separate_over_sweep']}x (separate / sweep)")
    print(f"variants whose metrics differ from their separate run: {differing or 'none'}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
