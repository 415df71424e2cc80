"""Dense encoding with `backend: auto` against fp32 torch: the time to encode a corpus's chunks through the dense
index build the pipeline runs (retrieval/kinds/dense.py, with the configuration's index environment), in one run each:

- torch: `backend: torch`, the fp32 reference;
- auto, first on this machine: a fresh machine cache, so the time includes exporting the CPU backends and measuring
  them on the corpus's texts (retrieval/backend_choice.py) before the encode;
- auto, measured before: the same machine cache again, the choice read from it; the encode alone.

Each run has an embedding cache of its own, so every chunk is encoded. The corpus is ../shared/data/cranfield when
present (1,400 abstracts, chunked as configured by default: 800 characters, overlap 100), else a generated BEIR
collection (ten_thousand.py's generator). The exports and caches live in a temporary directory; nothing in the
repository or the user's machine cache changes.

    PYTHONPATH=. .venv/bin/python benchmarks/encode_auto.py [--data DIR] [--limit N] [--out FILE.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ten_thousand import write_collection  # noqa: E402

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents  # noqa: E402
from rag_eval_assets.corpus.load import BEIR_CORPUS, load_corpus  # noqa: E402
from rag_eval_assets.index_env import index_env  # noqa: E402
from rag_eval_assets.retrieval.backend_choice import CACHE_ENV, cpu_flags, cpu_model  # noqa: E402
from rag_eval_assets.retrieval.index_families import IndexNeed  # noqa: E402
from rag_eval_assets.retrieval.kinds.dense import DENSE_INDEX, DenseSettings, index_key  # noqa: E402
from rag_eval_assets.settings import load_settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CRANFIELD = REPO.parent / "shared" / "data" / "cranfield"
SAMPLE_EVALSET = REPO / "data" / "sample" / "evalsets" / "eval_set.jsonl"
SYNTHETIC = {"n_questions": 100, "n_chunks": 2_000, "seed": 0}
# The instructions that decide which backend can beat fp32 torch; printed beside the CPU model, never used to choose.
SHOWN_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def say(message: str) -> None:
    print(message, flush=True)


def build(folder: Path, work: Path, backend: str, chunks: pd.DataFrame) -> tuple[float, dict]:
    """Seconds to build the dense index of `chunks` with `backend`, and the index's metadata; a fresh store (so a
    fresh embedding cache) under `work`."""
    work.mkdir(parents=True)
    config = work / "rag_eval.yaml"
    config.write_text(f"storage_dir: {work / 'store'}\ncorpus: {{id: bench, path: {folder}}}\n"
                      f"evalset: {{name: bench, path: {SAMPLE_EVALSET}}}\n", encoding="utf-8")
    spec = DenseSettings(backend=backend, device="cpu")
    need = IndexNeed(DENSE_INDEX, index_key(spec), spec)
    with index_env(load_settings(config), say) as env:
        start = time.perf_counter()
        built = DENSE_INDEX.build(need, chunks, env)
        return time.perf_counter() - start, built.metadata


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CRANFIELD, help="a BEIR folder (default: ../shared Cranfield)")
    parser.add_argument("--limit", type=int, default=0, help="encode only the first N chunks (0: all)")
    parser.add_argument("--out", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rag-eval-encode-auto-") as tmp:
        tmp_dir = Path(tmp)
        folder = args.data
        if not (folder / BEIR_CORPUS).is_file():
            folder = tmp_dir / "synthetic"
            write_collection(folder, **SYNTHETIC)
        chunks = chunk_documents(load_corpus(folder), "bench", ChunkerParams())
        if args.limit:
            chunks = chunks.head(args.limit)
        corpus = f"{folder.name if folder.parent != tmp_dir else 'synthetic (generated)'}: {len(chunks)} chunks, " \
                 f"mean {chunks['text'].str.len().mean():.0f} characters"
        os.environ[CACHE_ENV] = str(tmp_dir / "machine")
        say(f"torch on {corpus}")
        torch_s, _ = build(folder, tmp_dir / "torch", "torch", chunks)
        say("auto, first on this machine (exports and measurement included)")
        first_s, first = build(folder, tmp_dir / "auto-first", "auto", chunks)
        say("auto, measured before")
        cached_s, cached = build(folder, tmp_dir / "auto-cached", "auto", chunks)

    choice = first["backend_choice"]
    flags = set(cpu_flags().split())
    figures = {
        "cpu": cpu_model(), "cpus": os.cpu_count(), "flags": [f for f in SHOWN_FLAGS if f in flags], "corpus": corpus,
        "torch_s": torch_s, "auto_first_s": first_s, "auto_cached_s": cached_s, "chosen": choice["backend"],
        "chosen_model_id": first["embedding_model"], "measure_s": choice.get("measure_seconds"),
        "cached_choice_agrees": cached["backend"] == first["backend"] and cached["backend_choice"]["from_cache"],
        "choice": choice,
    }
    n = len(chunks)
    lines = [
        f"Dense encoding, backend auto vs fp32 torch: all-MiniLM-L6-v2 on {figures['cpu']} ({figures['cpus']} CPUs; "
        f"{' '.join(figures['flags']) or 'none of ' + ' '.join(SHOWN_FLAGS)})",
        f"corpus: {corpus}",
        "",
        f"{'run':<36} {'seconds':>8} {'texts/s':>8} {'vs torch':>9}",
        f"{'torch (fp32 reference)':<36} {torch_s:>8.1f} {n / torch_s:>8.1f} {1:>8.2f}x",
        f"{'auto, first run (exports + measure)':<36} {first_s:>8.1f} {n / first_s:>8.1f} {torch_s / first_s:>8.2f}x",
        f"{'auto, measured before':<36} {cached_s:>8.1f} {n / cached_s:>8.1f} {torch_s / cached_s:>8.2f}x",
        "",
        f"auto chose {choice['backend']} ({first['embedding_model']}); measuring took {choice['measure_seconds']} s "
        f"on {choice['sample']['passages']} chunks and {choice['sample']['queries']} pseudo-queries; the second run "
        f"{'read the same choice from the cache' if figures['cached_choice_agrees'] else 'DID NOT reuse the choice'}",
        f"reason: {choice['reason']}",
        "",
        f"{'backend':<10} {'seconds':>8} {'speedup':>8} {'nDCG@10 vs torch':>17}  verdict",
    ]
    for backend, row in choice["backends"].items():
        if "skipped" in row:
            lines.append(f"{backend:<10} skipped: {row['skipped']}")
        else:
            lines.append(f"{backend:<10} {row['seconds']:>8.2f} {row['speedup']:>7.2f}x "
                         f"{row['ndcg@10_vs_torch']:>17.4f}  {row['verdict']}")
    say("\n" + "\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
