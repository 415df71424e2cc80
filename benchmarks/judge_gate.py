"""The gate with grades, simulated: on pairs of synthetic judged runs (rag_eval_assets_tests/gate_simulation.py), how
often the calibrated gate says a cell changed when the answers did not (false alarms, either way) and how often it
says WORSE when every answer truly lost a point, for each judge and number of grades per run. Prints the Markdown
table of docs/metrics.md ("The gate with grades").

    PYTHONPATH=. .venv/bin/python benchmarks/judge_gate.py [--repetitions 20000] [--seed 0]
"""

from __future__ import annotations

import argparse

from rag_eval_assets_tests.gate_simulation import ANSWERS, CASES, GATE, GRADED, rates, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"{args.repetitions:,} pairs of runs per row, N = {ANSWERS} answers a run, alpha {GATE.alpha}\n")
    print("| baseline judge | candidate judge | answers | " + " | ".join(f"{n} grades a run" for n in GRADED) + " |")
    print("|---|---|---|" + "---|" * len(GRADED))
    for base_judge, cand_judge, worse in CASES:
        shares = []
        for n in GRADED:
            measured = rates(simulate(base_judge, cand_judge, worse, n, args.repetitions, args.seed)[0])
            shares.append(f"{measured['worse']:.3f} worse" if worse else f"{measured['false_alarm']:.4f} alarms")
        change = "one point worse" if worse else "unchanged"
        print(f"| {base_judge} | {cand_judge} | {change} | " + " | ".join(shares) + " |")


if __name__ == "__main__":
    main()
