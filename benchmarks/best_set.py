"""The confidence set of the best, simulated: on synthetic per-question scores with a known best among 5, 20 and 50
variants (rag_eval_assets_tests/best_set_simulation.py), how often the set holds a true best, how large it is as
questions are added and the gap widens, and beside it how often the arg-max of the means names a variant that is
not a true best; then the time of one set of 50 variants x 1,000 questions at the default 10,000 sign patterns.
Prints the Markdown tables of docs/runs.md ("Which retriever is best").

    PYTHONPATH=. .venv/bin/python benchmarks/best_set.py [--repetitions 500] [--n-perm 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rag_eval_assets.verdict.best_set import best_set
from rag_eval_assets_tests.best_set_simulation import MODELS, scores, simulate

ALPHA = 0.05
VARIANTS = (5, 20, 50)
# (questions, gap, true best tied at the top); the gaps per model: a tenth of a noise sd and more (normal), points
# of finding probability (ndcg).
GAPS = {"normal": (0.02, 0.05, 0.1), "ndcg": (0.05, 0.1, 0.2)}


def scenarios(model: str) -> list[tuple[int, float, int | None]]:
    small, middle, large = GAPS[model]
    return [(400, 0.0, None),  # every variant tied: the least favourable configuration
            (400, middle, 3),  # three tied at the top
            (100, middle, 1), (400, middle, 1), (1600, middle, 1),  # more questions
            (400, small, 1), (400, large, 1)]  # wider gaps


def timing(repeats: int = 3) -> float:
    x = scores("ndcg", 50, 1000, 0.1, 1, np.random.default_rng(0))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        best_set(x, alpha=ALPHA, n_perm=10_000)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=500)
    parser.add_argument("--n-perm", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"{args.repetitions:,} repetitions per row, alpha {ALPHA}, {args.n_perm:,} sign patterns per set\n")
    print("| scores | variants | questions | gap | true best | holds a given best | holds one | holds all | "
          "mean size | arg-max not a best |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for m in VARIANTS:
            for n, gap, ties in scenarios(model):
                tied = m if ties is None else ties
                o = simulate(model, m, n, gap, tied, args.repetitions, alpha=ALPHA, n_perm=args.n_perm,
                             seed=args.seed)
                print(f"| {model} | {m} | {n:,} | {gap:g} | {'all' if ties is None else tied} | {o.covered:.3f} | "
                      f"{o.covered_any:.3f} | {o.covered_all:.3f} | {o.size:.1f} | {o.argmax_wrong:.3f} |",
                      flush=True)
    print(f"\nOne set of 50 variants x 1,000 questions, 10,000 sign patterns: {timing():.2f} s (median of 3)")


if __name__ == "__main__":
    main()
