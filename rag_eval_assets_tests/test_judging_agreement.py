"""Judge-person agreement (judging/agreement.py): each statistic worked by hand on small tables, kappa and Spearman
against scikit-learn and scipy on random data, the too-few flag, the trust decision and bad scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from rag_eval_assets.errors import InputError
from rag_eval_assets.generation.judges import JUDGES
from rag_eval_assets.generation.prompts import JUDGE_PROMPTS
from rag_eval_assets.judging.agreement import SCALE, agreement, trusted


def test_the_scale_is_the_judges_score_enum() -> None:
    for version, judges in JUDGE_PROMPTS.items():
        assert set(judges) == set(JUDGES), version
        for judge, (_, schema) in judges.items():
            assert tuple(schema["properties"]["score"]["enum"]) == SCALE, (version, judge)


def test_a_small_table_worked_by_hand() -> None:
    # person 1 2 3 4 5, judge 1 3 3 5 5: judge - person = 0 1 0 1 0.
    #   exact 3/5, within one 5/5, mean bias 2/5.
    # Quadratic kappa, w_ij = (i - j)^2: observed sum(w * O) = 0 + 1 + 0 + 1 + 0 = 2.
    #   Marginals: person one each at 1..5; judge 1 at 1, 2 at 3, 2 at 5. sum(w * E) = (1/5) sum_i (1 (i-1)^2
    #   + 2 (i-3)^2 + 2 (i-5)^2) = (40 + 21 + 12 + 13 + 24) / 5 = 22, so kappa = 1 - 2/22 = 10/11.
    # Spearman: ranks person 1..5 (deviations -2 -1 0 1 2), judge 1 2.5 2.5 4.5 4.5 (deviations -2 -.5 -.5 1.5 1.5):
    #   sum of products 4 + .5 + 0 + 1.5 + 3 = 9, sums of squares 10 and 9, rho = 9 / sqrt(90) = 3 / sqrt(10).
    result = agreement(judge=[1, 3, 3, 5, 5], person=[1, 2, 3, 4, 5], minimum=5)
    assert result.n == 5
    assert result.exact == pytest.approx(0.6)
    assert result.within_one == 1.0
    assert result.mean_bias == pytest.approx(0.4)
    assert result.kappa == pytest.approx(10 / 11)
    assert result.spearman == pytest.approx(3 / math.sqrt(10))
    # rows = person, columns = judge
    assert result.confusion == (
        (0, 0, 0, 0, 0, 0),
        (0, 1, 0, 0, 0, 0),
        (0, 0, 0, 1, 0, 0),
        (0, 0, 0, 1, 0, 0),
        (0, 0, 0, 0, 0, 1),
        (0, 0, 0, 0, 0, 1),
    )
    assert not result.too_few and result.notes == ()


def test_a_judge_that_reverses_the_person() -> None:
    # person 0 5, judge 5 0: sum(w * O) = 25 + 25 = 50; marginals one each at 0 and 5 on both sides, so
    # sum(w * E) = (1/2)(1*1*25 + 1*1*25) = 25 and kappa = 1 - 50/25 = -1. Ranks reversed: rho = -1.
    # Bias (5 - 0 + 0 - 5) / 2 = 0: a mean bias of 0 does not mean agreement.
    result = agreement(judge=[5, 0], person=[0, 5])
    assert (result.exact, result.within_one, result.mean_bias) == (0.0, 0.0, 0.0)
    assert result.kappa == pytest.approx(-1.0)
    assert result.spearman == pytest.approx(-1.0)
    assert result.confusion[0][5] == 1 and result.confusion[5][0] == 1


def test_a_judge_that_always_says_two() -> None:
    # person 1 2 3, judge 2 2 2: sum(w * O) = 1 + 0 + 1 = 2; judge marginal 3 at 2, person one each at 1, 2, 3:
    # E_i2 = 1 for i = 1, 2, 3, sum(w * E) = 1 + 0 + 1 = 2, kappa = 0 (no better than chance). Spearman undefined.
    result = agreement(judge=[2, 2, 2], person=[1, 2, 3])
    assert result.kappa == pytest.approx(0.0)
    assert math.isnan(result.spearman)
    assert result.exact == pytest.approx(1 / 3) and result.within_one == 1.0 and result.mean_bias == 0.0
    assert result.too_few
    assert result.notes == (
        "Only 3 graded answer(s), fewer than 10: these figures say little about the judge.",
        "Spearman's correlation is undefined: the judge gave one grade to every answer.",
    )


def test_both_sides_constant_and_equal_leave_kappa_undefined() -> None:
    result = agreement(judge=[4] * 12, person=[4] * 12)
    assert result.exact == 1.0 and math.isnan(result.kappa) and math.isnan(result.spearman)
    assert not result.too_few
    assert result.notes == (
        "Kappa is undefined: the judge and the person gave one and the same grade to every answer.",
        "Spearman's correlation is undefined: the judge and the person gave one grade to every answer.",
    )


def test_no_pairs() -> None:
    result = agreement(judge=[], person=[])
    assert result.n == 0 and result.too_few
    assert all(math.isnan(v) for v in (result.exact, result.within_one, result.kappa, result.spearman,
                                       result.mean_bias))
    assert result.confusion == tuple((0,) * 6 for _ in range(6))


def test_too_few_is_below_the_minimum_and_changes_no_figure() -> None:
    person = [0, 1, 2, 3, 4, 5, 5, 4, 3, 2]
    judge = [0, 2, 2, 3, 5, 5, 4, 4, 2, 2]
    nine, ten = agreement(judge[:9], person[:9]), agreement(judge, person)
    assert nine.too_few and not ten.too_few
    assert agreement(judge, person, minimum=11).too_few
    flagged = agreement(judge, person, minimum=11)
    assert (flagged.kappa, flagged.spearman, flagged.confusion) == (ten.kappa, ten.spearman, ten.confusion)


def test_kappa_and_spearman_agree_with_sklearn_and_scipy_on_random_data() -> None:
    rng = np.random.default_rng(7)
    compared = 0
    for trial in range(150):
        n = int(rng.integers(2, 80))
        # A random subset of the scale, so some runs use few categories (the labels stay the whole scale).
        categories = rng.choice(6, size=int(rng.integers(1, 7)), replace=False)
        person = rng.choice(categories, size=n)
        noise = rng.integers(-2, 3, size=n) if trial % 3 else rng.integers(-5, 6, size=n)
        judge = np.clip(person + noise, 0, 5)
        result = agreement(judge, person)
        expected_kappa = cohen_kappa_score(person, judge, weights="quadratic", labels=list(range(6)))
        if np.isnan(expected_kappa):
            assert math.isnan(result.kappa)
        else:
            assert result.kappa == pytest.approx(expected_kappa, abs=1e-12), trial
            compared += 1
        if len(set(person)) > 1 and len(set(judge)) > 1:
            assert result.spearman == pytest.approx(spearmanr(judge, person).statistic, abs=1e-12), trial
        else:
            assert math.isnan(result.spearman)
        assert result.mean_bias == pytest.approx(float(np.mean(judge - person)))
        assert sum(map(sum, result.confusion)) == n
    assert compared > 120


def test_kappa_is_the_same_whatever_the_argument_order() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 6, 40), rng.integers(0, 6, 40)
    forward, backward = agreement(a, b), agreement(b, a)
    assert forward.kappa == pytest.approx(backward.kappa)
    assert forward.mean_bias == pytest.approx(-backward.mean_bias)
    assert np.array_equal(np.array(forward.confusion), np.array(backward.confusion).T)


def test_scores_as_floats_are_accepted_when_whole() -> None:
    assert agreement([1.0, 4.0], [1, 4]) == agreement([1, 4], [1, 4])


def test_bad_scores_are_named_by_side_and_position() -> None:
    with pytest.raises(InputError) as raised:
        agreement(judge=[1, 2.5, 6], person=[1, 2, 3])
    assert str(raised.value) == (
        "2 problem(s) in input:\n"
        "  - judge:1: field 'score': 2.5 is not an integer of the scale 0-5\n"
        "  - judge:2: field 'score': 6.0 is not an integer of the scale 0-5"
    )
    with pytest.raises(InputError, match=r"person:0: field 'score': nan is not an integer"):
        agreement(judge=[1], person=[float("nan")])
    with pytest.raises(InputError, match=r"person:1: field 'score': -1.0 is not"):
        agreement(judge=[1, 1], person=[1, -1])
    with pytest.raises(InputError, match="2 grades for 3 judge scores: they must be paired"):
        agreement(judge=[1, 2, 3], person=[1, 2])
    with pytest.raises(InputError, match=r"expected a list of scores, got shape \(1, 2\)"):
        agreement(judge=[[1, 2]], person=[1, 2])


def test_trust_is_a_kappa_threshold_with_its_reason() -> None:
    assert trusted(0.4) == trusted(0.4, threshold=0.4)
    assert trusted(0.4).trusted and trusted(0.4).reason == "trusted: kappa 0.40 >= 0.4"
    low = trusted(0.25)
    assert not low.trusted
    assert low.reason == "not trusted: kappa 0.25 < 0.4, the judge agrees too little with the person"
    assert trusted(0.25, threshold=0.2).trusted
    undefined = trusted(float("nan"))
    assert not undefined.trusted and "undefined" in undefined.reason
    with pytest.raises(ValueError, match=r"a kappa threshold lies in \[-1, 1\], got 1.5"):
        trusted(0.5, threshold=1.5)
