"""What explaining the verdict costs: a comparison of two runs of 1,000 questions x 16 cells (4 retrievers x k 1, 3,
5, 10, each row with its top-k retrieved list and its gold items), one retriever broken, timed with its evidence and
without it (the comparison as it was before the evidence: compare_runs with the evidence step left out).

Each timing is what write_run does with a comparison: compare_runs, comparison.json's record and comparison.md.
The two alternate, and each figure is the median of --repeats repetitions. The evidence must cost at most 2 s more.

    .venv/bin/python benchmarks/comparison_evidence.py [--questions 1000] [--repeats 3]

Everything is written under a temporary directory; nothing in the repository changes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.reports.comparison import comparison_markdown
from rag_eval_assets.retrieval.backend_choice import cpu_model
from rag_eval_assets.runs.contents import metrics_document, run_config
from rag_eval_assets.runs.save import save_run
from rag_eval_assets.runs.store import read_run
from rag_eval_assets.runs.versions import VersionTuple
from rag_eval_assets.verdict import compare
from rag_eval_assets.verdict.compare import compare_runs

RETRIEVERS = ("bm25", "dense", "hybrid", "http")
KS = (1, 3, 5, 10)
BUDGET_S = 2.0



def write(runs_dir: Path, run_id: str, n: int, broken: str | None, seed: int) -> Path:
    """A run whose retrievers put each question's gold document at a random rank in 1..12 (the broken one
    4 ranks lower), with nDCG@k of that rank per cell."""
    rng = np.random.default_rng(seed)
    rows, per_query = [], []
    for retriever in RETRIEVERS:
        ranks = rng.integers(1, 13, size=n) + (4 if retriever == broken else 0)
        for i in range(n):
            query_id, gold = f"q{i:04d}", f"d{i:04d}"
            ranked = [f"x{i:04d}_{j}" for j in range(max(KS))]
            if ranks[i] <= max(KS):
                ranked[ranks[i] - 1] = gold
            for k in KS:
                ndcg = 1 / np.log2(ranks[i] + 1) if ranks[i] <= k else 0.0
                rows.append({
                    "query_id": query_id, "question": f"What does document {i} say?", "retriever": retriever, "k": k,
                    "weight": 1.0, "metrics": {"ndcg@k": ndcg},
                    "retrieved": [{"rank": r + 1, "chunk_id": f"c_{doc}", "doc_id": doc, "rel_path": f"{doc}.md",
                                   "heading_path": "", "score": 10.0 - r, "text": "text " * 20}
                                  for r, doc in enumerate(ranked[:k])],
                    "gold": {"level": "doc", "items": [{"id": gold, "grade": 1}]},
                })
                per_query.append((query_id, retriever, k, "ndcg@k", ndcg))
    frame = pd.DataFrame(per_query, columns=["query_id", "retriever", "k", "metric", "value"])
    aggregate = aggregate_metrics(frame, pd.DataFrame({"query_id": [f"q{i:04d}" for i in range(n)]}), slices=(),
                                  n_boot=200)
    versions = VersionTuple().with_part("dataset", evalset_sha256="e" * 64, corpus_sha256="c" * 64)
    return save_run(runs_dir, results=rows, metrics=metrics_document(aggregate), config=run_config(versions),
                    run_id=run_id)


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = read_run(write(Path(tmp), "base", args.questions, None, 0))
        cand = read_run(write(Path(tmp), "cand", args.questions, "http", 0))

        def with_evidence() -> object:
            c = compare_runs(base, cand)
            return json.dumps(c.as_json()), comparison_markdown(c)

        def without_evidence() -> object:
            with mock.patch.object(compare, "_evidence", lambda *args: []), \
                    mock.patch.object(compare, "RowIndex", lambda run: None):
                return with_evidence()

        result = compare_runs(base, cand)
        assert result.verdict == "worse" and {c.retriever for c in result.deciding_cells} == {"http"}, result.verdict
        assert result.evidence and all(len(e.questions) == 10 for e in result.evidence)
        before, after = [], []
        for _ in range(args.repeats):
            before.append(timed(without_evidence))
            after.append(timed(with_evidence))
    b, a = statistics.median(before), statistics.median(after)
    cells = len(result.cells)
    print(f"CPU: {cpu_model()}")
    print(f"{args.questions} questions x {cells} cells, deciding {', '.join(c.name for c in result.deciding_cells)}")
    print(f"comparison without evidence: {b:.3f} s (median of {args.repeats})")
    print(f"comparison with evidence:    {a:.3f} s (median of {args.repeats})")
    print(f"evidence costs {a - b:+.3f} s (budget +{BUDGET_S:.1f} s): {'ok' if a - b <= BUDGET_S else 'OVER BUDGET'}")


if __name__ == "__main__":
    main()
