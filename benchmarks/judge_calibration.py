"""How honest the judge intervals are: on synthetic runs with a known true mean (rag_eval_assets_tests/
judge_simulation.py), the coverage and mean width of the calibrated (PPI++), naive (judge mean) and human-only 95%
intervals for each simulated judge and number of graded answers, then how often the calibrated and naive run
differences are significant with and without a real change, then the coverage where grades are mostly all equal
(`--equal-only` prints that table alone). Prints the Markdown tables of docs/metrics.md.

    PYTHONPATH=. .venv/bin/python benchmarks/judge_calibration.py [--repetitions 10000] [--seed 0]
"""

from __future__ import annotations

import argparse

from rag_eval_assets_tests.judge_simulation import (
    ANSWERS,
    GRADED,
    JUDGES,
    TRUE_MEAN,
    coverage,
    difference_rejections,
    equal_grades_coverage,
)

METHODS = ("calibrated", "naive", "human_only")
# (baseline judge, current judge, current truly better)
DIFFERENCES = (
    ("one_point_high", "one_point_high", False),
    ("unbiased_noisy", "one_point_high", False),
    ("unbiased_noisy", "unbiased_noisy", True),
    ("one_point_high", "one_point_high", True),
    ("pure_noise", "pure_noise", True),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--equal-only", action="store_true", help="only the table of equal grades")
    args = parser.parse_args()
    if not args.equal_only:
        _coverage_and_differences(args.repetitions, args.seed)
    print(f"\nMostly equal grades, {args.repetitions:,} runs per row: coverage of the 95% intervals cut to 0-5\n")
    print("| n | s | all equal | calibrated | human-only |\n|---|---|---|---|---|")
    for r in equal_grades_coverage(args.repetitions, args.seed):
        print(f"| {r.n_graded} | {r.share:.2f} | {r.all_equal:.3f} | {r.calibrated:.3f} | {r.human_only:.3f} |")


def _coverage_and_differences(repetitions: int, seed: int) -> None:
    rows = {(r.judge, r.n_graded, r.method): r for r in coverage(repetitions, seed)}
    print(f"{repetitions:,} runs per row, N = {ANSWERS} answers, true mean {TRUE_MEAN:.2f}; "
          "coverage of the 95% interval / its mean width\n")
    print("| judge | graded n | " + " | ".join(METHODS) + " |")
    print("|---|---|" + "---|" * len(METHODS))
    for judge in JUDGES:
        for n in GRADED:
            cells = [f"{rows[judge, n, m].coverage:.3f} / {rows[judge, n, m].mean_width:.3f}" for m in METHODS]
            print(f"| {judge} | {n} | " + " | ".join(cells) + " |")
    print("\nShare of run pairs (baseline, current) whose difference is significant at 0.05\n")
    print("| baseline judge | current judge | true change | graded n per run | calibrated | naive |")
    print("|---|---|---|---|---|---|")
    for baseline, current, better in DIFFERENCES:
        for n in GRADED:
            share = difference_rejections(baseline, current, better, n, repetitions, seed)
            change = "+0.50" if better else "none"
            print(f"| {baseline} | {current} | {change} | {n} | {share['calibrated']:.3f} | {share['naive']:.3f} |")


if __name__ == "__main__":
    main()
