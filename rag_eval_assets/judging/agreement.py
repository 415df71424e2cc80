"""Agreement between an LLM judge and a person on the judges' 0-5 scale (seed 002: groundedness, correctness).

Every statistic is over the same pairs (judge score, person's grade) of the same answers. Kappa and the confusion
matrix always use the whole scale as categories, so two runs that happen to use different grades stay comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rag_eval_assets.errors import InputError, InputProblem

# The judges' score enum (generation/prompts.py); test_judging_agreement.py checks that they are the same.
SCALE = tuple(range(6))
# Fewer graded pairs than this and the figures are still given, but flagged as saying little.
MINIMUM_PAIRS = 10
# Quadratic-weighted kappa at or above this and a judge is trusted (0.4 is where Landis and Koch's "moderate"
# agreement begins).
TRUST_KAPPA = 0.4


@dataclass(frozen=True)
class Agreement:
    """Agreement of n pairs. A statistic that is undefined is NaN and `notes` says why."""

    n: int
    exact: float  # share of pairs with judge == person
    within_one: float  # share with |judge - person| <= 1
    kappa: float  # Cohen's quadratic-weighted kappa over the categories SCALE
    spearman: float  # Spearman rank correlation (average ranks for ties)
    mean_bias: float  # mean of judge - person: above 0, the judge is more generous than the person
    confusion: tuple[tuple[int, ...], ...]  # confusion[person][judge]: counts, both indexed by SCALE
    too_few: bool  # n < minimum
    notes: tuple[str, ...]  # sentences for the reader: too few pairs, undefined statistics


@dataclass(frozen=True)
class Trust:
    trusted: bool
    reason: str


def agreement(judge: ArrayLike, person: ArrayLike, minimum: int = MINIMUM_PAIRS) -> Agreement:
    """Agreement of `judge[i]` with `person[i]` for every i. Scores must be integers of SCALE (3.0 counts as 3);
    anything else raises InputError naming the side ("judge" or "person") and the position."""
    j = _scores(judge, "judge")
    p = _scores(person, "person")
    if len(j) != len(p):
        raise InputError([InputProblem("person", None, None,
                                       f"{len(p)} grades for {len(j)} judge scores: they must be paired")])
    n = len(j)
    k = len(SCALE)
    confusion = np.zeros((k, k), dtype=np.int64)
    # SCALE starts at 0 with step 1, so a score is its own category index.
    np.add.at(confusion, (p, j), 1)
    notes = []
    too_few = n < minimum
    if too_few:
        notes.append(f"Only {n} graded answer(s), fewer than {minimum}: these figures say little about the judge.")
    if n == 0:
        return Agreement(0, math.nan, math.nan, math.nan, math.nan, math.nan, _tuples(confusion), too_few,
                         tuple(notes))
    diff = j - p
    kappa = _quadratic_kappa(confusion)
    if math.isnan(kappa):
        notes.append("Kappa is undefined: the judge and the person gave one and the same grade to every answer.")
    constant = [side for side, scores in (("the judge", j), ("the person", p)) if len(np.unique(scores)) < 2]
    if constant:
        notes.append(f"Spearman's correlation is undefined: {' and '.join(constant)} gave one grade to every answer.")
        spearman = math.nan
    else:
        from scipy.stats import rankdata  # when used: a second of every Dagster process's import

        spearman = float(np.corrcoef(rankdata(j), rankdata(p))[0, 1])
    return Agreement(
        n=n,
        exact=float(np.mean(diff == 0)),
        within_one=float(np.mean(np.abs(diff) <= 1)),
        kappa=kappa,
        spearman=spearman,
        mean_bias=float(np.mean(diff)),
        confusion=_tuples(confusion),
        too_few=too_few,
        notes=tuple(notes),
    )


def trusted(kappa: float, threshold: float = TRUST_KAPPA) -> Trust:
    """Whether a judge with this quadratic-weighted kappa against a person is trusted, and why, in a sentence."""
    if not -1 <= threshold <= 1:
        raise ValueError(f"a kappa threshold lies in [-1, 1], got {threshold}")
    if math.isnan(kappa):
        return Trust(False, "not trusted: its agreement with the person (kappa) is undefined")
    if kappa >= threshold:
        return Trust(True, f"trusted: kappa {kappa:.2f} >= {threshold:g}")
    return Trust(False, f"not trusted: kappa {kappa:.2f} < {threshold:g}, the judge agrees too little with the person")


def decide_trust(found: Agreement, threshold: float, min_grades: int) -> Trust | None:
    """trusted(kappa) once at least `min_grades` answers are graded; None (undecided) below that: too few grades say
    nothing for or against a judge."""
    return None if found.n < min_grades else trusted(found.kappa, threshold)


def _quadratic_kappa(confusion: np.ndarray) -> float:
    """1 - sum(w * observed) / sum(w * expected), w_ij = (i - j)^2 (Cohen 1968; the usual division by (k - 1)^2
    cancels), expected = the outer product of the two marginals / n. NaN when expected disagreement is 0: both sides
    put every pair in the same one category."""
    index = np.arange(confusion.shape[0])
    weights = (index[:, None] - index[None, :]) ** 2
    n = confusion.sum()
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / n
    disagreement = float((weights * expected).sum())
    if disagreement == 0:
        return math.nan
    return 1.0 - float((weights * confusion).sum()) / disagreement


def _scores(values: ArrayLike, side: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise InputError([InputProblem(side, None, None, f"expected a list of scores, got shape {array.shape}")])
    bad = ~np.isin(array, SCALE)  # NaN, fractions and out-of-scale values are all outside
    if bad.any():
        scale = f"{SCALE[0]}-{SCALE[-1]}"
        raise InputError([
            InputProblem(side, int(i), "score", f"{float(array[i])!r} is not an integer of the scale {scale}")
            for i in np.flatnonzero(bad)
        ])
    return array.astype(np.int64)


def _tuples(matrix: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(v) for v in row) for row in matrix)
