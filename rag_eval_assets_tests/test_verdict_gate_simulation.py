"""The gate with grades, simulated (issue 29, point 1): with an uninformative judge (one score for every answer, or
pure noise), a biased one, and one that drifted between the runs, the calibrated gate alarms on unchanged answers no
more often than alpha, and finds a real one-point drop; the verdicts computed in bulk are the gate's own
(gate_simulation.py; the figures in docs/metrics.md come from benchmarks/judge_gate.py)."""

from __future__ import annotations

import math

import pytest

from rag_eval_assets_tests.gate_simulation import CASES, GATE, GRADED, gate_verdict, rates, simulate

REPETITIONS = 20_000
# Three Monte Carlo standard errors of a share near alpha over REPETITIONS pairs (0.0046): a rate within them is
# alpha as far as REPETITIONS pairs can tell.
SLACK = 3 * math.sqrt(GATE.alpha * (1 - GATE.alpha) / REPETITIONS)


@pytest.mark.parametrize("graded", GRADED)
def test_the_calibrated_gate_keeps_alpha_and_finds_a_real_drop(graded: int) -> None:
    for base_judge, cand_judge, worse in CASES:
        verdicts, pairs = simulate(base_judge, cand_judge, worse, graded, REPETITIONS, seed=graded)
        # The bulk verdicts are what compare_runs says of the same pairs.
        assert [gate_verdict(*pair) for pair in pairs[:8]] == list(verdicts[:8])
        measured = rates(verdicts)
        print(graded, base_judge, cand_judge, worse, measured)
        if not worse:
            assert measured["false_alarm"] <= GATE.alpha + SLACK, (base_judge, cand_judge, measured)
        else:
            # A drop of one point on 0-5: the grades alone find it a third of the time from 12 grades a run; the
            # judge, once it is weighed in, helps as far as it is informative.
            least = {12: 0.3, 40: 0.75 if base_judge in ("constant", "pure_noise") else 0.95}[graded]
            assert measured["worse"] >= least, (base_judge, cand_judge, measured)
