"""Ten thousand questions end to end: `rag-eval run` on a generated BEIR collection of --questions questions and
--chunks one-chunk documents, with wall time per stage, peak RSS, the size of every table and run file, and the
time report.html takes to load in headless Chromium.

The collection is generated deterministically from --seed: documents of 100-150 words (about 520 characters: one
chunk each under the 800-character chunk size) drawn from a Zipf vocabulary (scale.py's generator); question i takes
4-6 of its document's rarer words plus 2 common ones, and its document is its one relevant document (qrels). The run uses the retrievers of
--retrievers (bm25 and hybrid by default; hybrid brings dense with all-MiniLM-L6-v2, the offline model) and extractive
answers at k 5 and 10, in a temporary directory with its own DAGSTER_HOME.

Stage times come from the Dagster instance's event log (each step's start and end, every run the command launched);
peak RSS is /usr/bin/time's maximum resident set size of the largest process of the tree (`rag-eval run` executes
its steps in process, so that is the run). --encode-sample N (default 2,000) also times the dense encoder alone on N
of the chunk texts and extrapolates to the whole collection, so that a run without dense can still say what dense
would cost: that figure is printed as an extrapolation.

    PYTHONPATH=. .venv/bin/python benchmarks/ten_thousand.py --questions 1000 --chunks 10000
    PYTHONPATH=. .venv/bin/python benchmarks/ten_thousand.py --retrievers bm25 --out /tmp/10k.json   # 10k / 100k
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import _zipf_cdf, vocabulary  # noqa: E402

DOC_WORDS = (100, 150)
QUESTION_RARE = (4, 6)
QUESTION_COMMON = 2
VOCAB = 50_000
REPORT_LOAD_LIMIT_S = 5.0


def write_collection(directory: Path, n_questions: int, n_chunks: int, seed: int) -> Path:
    """corpus.jsonl, queries.jsonl and qrels.tsv under `directory`, written as generated (never held whole)."""
    if n_chunks < n_questions:
        raise ValueError(f"--chunks ({n_chunks}) must be at least --questions ({n_questions})")
    rng = np.random.default_rng(seed)
    words = vocabulary(VOCAB)
    cdf = _zipf_cdf(VOCAB)
    directory.mkdir(parents=True, exist_ok=True)
    # Question i is about document i * stride: relevant documents spread over the whole corpus.
    stride = n_chunks // n_questions
    with (directory / "corpus.jsonl").open("w", encoding="utf-8") as corpus, \
            (directory / "queries.jsonl").open("w", encoding="utf-8") as queries, \
            (directory / "qrels.tsv").open("w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for start in range(0, n_chunks, 10_000):
            lengths = rng.integers(DOC_WORDS[0], DOC_WORDS[1] + 1, size=min(10_000, n_chunks - start))
            ids = np.minimum(np.searchsorted(cdf, rng.random(int(lengths.sum()))), VOCAB - 1)
            ends = np.cumsum(lengths)
            for offset, (a, b) in enumerate(zip(ends - lengths, ends)):
                n = start + offset
                doc = ids[a:b]
                corpus.write(json.dumps({"_id": f"d{n:06d}", "title": "", "text": " ".join(words[doc])}) + "\n")
                if n % stride == 0 and n // stride < n_questions:
                    q = n // stride
                    rare = np.unique(doc[doc >= 200])
                    picked = rng.choice(rare, size=min(len(rare), int(rng.integers(*QUESTION_RARE, endpoint=True))),
                                        replace=False)
                    common = rng.integers(0, 200, size=QUESTION_COMMON)
                    text = " ".join(words[np.concatenate([picked, common])])
                    queries.write(json.dumps({"_id": f"q{q:05d}", "text": f"what about {text}?"}) + "\n")
                    qrels.write(f"q{q:05d}\td{n:06d}\t1\n")
    return directory


def write_config(tmp: Path, beir: Path, retrievers: list[str]) -> Path:
    path = tmp / "rag_eval.yaml"
    path.write_text(
        f"storage_dir: {tmp / 'store'}\ncorpus: {{id: synthetic, path: {beir}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {beir}}}\nchunking: {{chunk_size_chars: 2000, overlap_chars: 0}}\n"
        f"retrievers: [{', '.join(retrievers)}]\nk_values: [1, 5, 10]\n"
        "answering: {answerer: extractive, k_values: [5, 10]}\n",
        encoding="utf-8",
    )
    return path


def run_pipeline(config: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """`rag-eval run` under /usr/bin/time -v: (wall s, peak RSS GiB)."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "rag_eval_assets.cli", "--config", str(config), "run"]
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, check=False)
    wall = time.perf_counter() - start
    text = log.read_text(encoding="utf-8")
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{text[-4000:]}")
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    return wall, peak_kb / 2**20


def stage_times(home: Path) -> list[tuple[str, str, float]]:
    """(job, step key, seconds) of every step of every run in the instance at `home`, in start order."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    rows = []
    with dg.DagsterInstance.get() as instance:
        for run in instance.get_runs():
            for step in instance.get_run_step_stats(run.run_id):
                if step.start_time and step.end_time:
                    rows.append((step.start_time, run.job_name, step.step_key, step.end_time - step.start_time))
    return [(job, key, seconds) for _, job, key, seconds in sorted(rows)]


def sizes(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def report_load_seconds(report: Path) -> float:
    """Seconds from navigation to the load event of `report` in headless Chromium (as test_ui_browser.py runs it)."""
    from playwright.sync_api import sync_playwright

    from rag_eval_assets_tests.real_components import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(report.as_uri(), wait_until="load", timeout=120_000)
        seconds = time.perf_counter() - start
        browser.close()
    return seconds


def encode_rate(beir: Path, n: int) -> float:
    """Texts/s of the dense encoder (all-MiniLM-L6-v2, CPU) on the first `n` chunk texts, after a warm-up batch."""
    from rag_eval_assets.retrieval.encoders import get_encoder

    texts = []
    with (beir / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line, _ in zip(corpus, range(n + 64)):
            texts.append(json.loads(line)["text"])
    encoder = get_encoder("all-MiniLM-L6-v2", device="cpu")
    encoder.encode(texts[:64], "passage")
    start = time.perf_counter()
    encoder.encode(texts[64:], "passage")
    return (len(texts) - 64) / (time.perf_counter() - start)


def mib(size: int) -> str:
    return f"{size / 2**20:,.2f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--retrievers", default="bm25,hybrid", help="comma-separated, e.g. bm25 or bm25,hybrid")
    parser.add_argument("--encode-sample", type=int, default=2000, help="chunks the dense encoder is timed on (0: no)")
    parser.add_argument("--keep", type=Path, help="work in this directory (kept) instead of a temporary one")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rag-eval-10k-") as tmp_name:
        tmp = args.keep or Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        beir = write_collection(tmp / "beir", args.questions, args.chunks, args.seed)
        generate_s = time.perf_counter() - start
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        (home / "dagster.yaml").write_text("", encoding="utf-8")
        env = {**os.environ, "DAGSTER_HOME": str(home)}
        config = write_config(tmp, beir, args.retrievers.split(","))
        wall, peak_gb = run_pipeline(config, env, tmp / "run.log")
        steps = stage_times(home)
        store = tmp / "store"
        (run_dir,) = (store / "runs").iterdir()
        load_s = report_load_seconds(run_dir / "report.html")
        rate = encode_rate(beir, args.encode_sample) if args.encode_sample else None
        tables = sizes(store / "assets")
        files = sizes(run_dir)

    figures = {
        "questions": args.questions, "chunks": args.chunks, "retrievers": args.retrievers,
        "generate_s": round(generate_s, 1), "run_wall_s": round(wall, 1), "peak_rss_gib": round(peak_gb, 2),
        "steps": [{"job": j, "step": s, "seconds": round(t, 2)} for j, s, t in steps],
        "tables": dict(tables), "run_files": dict(files), "report_load_s": round(load_s, 2),
    }
    print(f"{args.questions:,} questions, {args.chunks:,} chunks, retrievers {args.retrievers}; "
          f"collection generated in {generate_s:.1f} s")
    print(f"rag-eval run: {wall:.1f} s wall, peak RSS {peak_gb:.2f} GiB")
    print("\nstage (job / step)                                              seconds")
    for job, step, seconds in steps:
        print(f"  {job + ' / ' + step:<62} {seconds:>8.1f}")
    print("\ntables (store/assets)")
    for name, size in tables:
        print(f"  {name:<70} {mib(size):>14}")
    print("\nrun files")
    for name, size in files:
        print(f"  {name:<70} {mib(size):>14}")
    print(f"\nreport.html load in headless Chromium: {load_s:.2f} s (limit {REPORT_LOAD_LIMIT_S:.0f} s)")
    if rate is not None:
        figures["dense_texts_per_s"] = round(rate, 1)
        figures["dense_encode_all_s_extrapolated"] = round(args.chunks / rate)
        print(f"dense encoder on {args.encode_sample:,} chunks: {rate:.1f} texts/s; EXTRAPOLATED to all "
              f"{args.chunks:,} chunks: {args.chunks / rate:,.0f} s")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if load_s < REPORT_LOAD_LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
