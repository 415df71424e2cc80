"""Re-run benchmark: `rag-eval run` on a generated BEIR collection of at least 5,000 documents (bm25 + dense with
all-MiniLM-L6-v2), cold, then again with nothing changed, then after a change of k_values alone; each timed as a
separate process, against `python -c "import dagster"` timed in the same run.

Targets (issue 11): the unchanged re-run encodes 0 texts and makes 0 LLM calls (it launches no run, so no asset
materializes: read off the instance) and takes at most import + 10 s; the k_values change takes at most 25% of the
cold run. Exit status 1 when a target is missed.

    .venv/bin/python benchmarks/incremental.py [--docs 5000] [--out FILE.json]

Everything is written under a temporary directory; nothing in the repository changes.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

from rag_eval_assets_tests.synthetic_beir import FILLER, write_collection

GRID = "retrievers: [bm25, dense]\n"
BEFORE = GRID + "k_values: [1, 5, 10]\nanswering: {k_values: [5]}\n"
K_CHANGED = GRID + "k_values: [1, 3, 5, 10]\nanswering: {k_values: [3, 5]}\n"
WARM_ALLOWANCE_S = 10.0
K_CHANGE_SHARE = 0.25


def collection(directory: Path, n_docs: int) -> Path:
    """The synthetic BEIR collection (its queries, qrels and documents), padded with filler documents to n_docs."""
    write_collection(directory)
    corpus = directory / "corpus.jsonl"
    have = sum(1 for _ in corpus.open(encoding="utf-8"))
    rng = random.Random(1)
    with corpus.open("a", encoding="utf-8") as out:
        for i in range(n_docs - have):
            out.write(json.dumps({"_id": f"pad{i:05d}", "title": "", "text": " ".join(rng.sample(FILLER, 40))}) + "\n")
    return directory


def write_config(tmp: Path, beir: Path, grid: str) -> Path:
    path = tmp / "rag_eval.yaml"
    path.write_text(
        f"storage_dir: {tmp / 'store'}\ncorpus: {{id: synthetic, path: {beir}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {beir}}}\nchunking: {{chunk_size_chars: 100000, overlap_chars: 0}}\n"
        "retrieval: {level: doc}\n" + grid,
        encoding="utf-8",
    )
    return path


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def materialized(stdout: str) -> list[str]:
    return re.findall(r"^  (\S+)\s+materialized", stdout, flags=re.M)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000, help="documents in the collection (at least 5,000)")
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-eval-incremental-") as tmp_name:
        tmp = Path(tmp_name)
        beir = collection(tmp / "beir", max(args.docs, 5000))
        n_docs = sum(1 for _ in (beir / "corpus.jsonl").open(encoding="utf-8"))
        (tmp / "home").mkdir()
        (tmp / "home" / "dagster.yaml").write_text("", encoding="utf-8")  # the default instance, said explicitly
        env = {**os.environ, "DAGSTER_HOME": str(tmp / "home")}
        config = write_config(tmp, beir, BEFORE)
        cli = [sys.executable, "-m", "rag_eval_assets.cli", "--config", str(config), "run"]
        imports = statistics.median(timed([sys.executable, "-c", "import dagster"], env)[0] for _ in range(3))

        cold, cold_out = timed(cli, env)
        os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
        with dg.DagsterInstance.get() as instance:
            runs_before = len(instance.get_runs())
            encoded_cold = instance.get_latest_materialization_event(
                dg.AssetKey(["dense_index", "all-MiniLM-L6-v2"])).asset_materialization.metadata["encoded"].value
        warm, warm_out = timed(cli, env)
        with dg.DagsterInstance.get() as instance:
            warm_runs = len(instance.get_runs()) - runs_before
        write_config(tmp, beir, K_CHANGED)
        k_change, k_out = timed(cli, env)

    figures = {
        "documents": n_docs,
        "import_dagster_s": round(imports, 2),
        "cold_s": round(cold, 1),
        "cold_encoded": encoded_cold,
        "warm_s": round(warm, 1),
        "warm_runs": warm_runs,
        "warm_materialized": materialized(warm_out),
        "k_change_s": round(k_change, 1),
        "k_change_materialized": materialized(k_out),
        "warm_minus_import_s": round(warm - imports, 2),
        "k_change_over_cold": round(k_change / cold, 3),
    }
    # No run launched: no asset materialized, so the dense encoder encoded nothing and no LLM was called.
    checks = {
        "warm re-run launches no run (0 texts encoded, 0 LLM calls)":
            warm_runs == 0 and not figures["warm_materialized"],
        f"warm re-run <= import dagster + {WARM_ALLOWANCE_S:.0f} s": warm <= imports + WARM_ALLOWANCE_S,
        f"k_values change <= {K_CHANGE_SHARE:.0%} of cold": k_change <= K_CHANGE_SHARE * cold,
        "k_values change re-runs no retrieval and no index": not any(
            name.startswith(("retrieval_results", "dense_index", "bm25_index", "chunks"))
            for name in figures["k_change_materialized"]),
    }
    print(json.dumps(figures, indent=2))
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    if args.out:
        Path(args.out).write_text(json.dumps({**figures, "checks": checks}, indent=2) + "\n", encoding="utf-8")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
