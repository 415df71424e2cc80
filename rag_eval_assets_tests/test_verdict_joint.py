"""The joint correction (step-down max-T over sign flips of whole questions): exact small cases, Holm as its bound,
and a simulation on synthetic comparisons with a known truth: false "worse" at or below alpha, power above Holm."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval_assets.verdict.corrections import adjust_p_values, joint_adjusted
from rag_eval_assets.verdict.joint import max_t_adjusted
from rag_eval_assets.verdict.paired import sign_flip_p_values

ALPHA = 0.05
KS = (1, 3, 5)


def test_one_cell_is_its_own_sign_flip_test() -> None:
    d = np.array([[0.5], [0.25], [1.0], [-0.25], [0.0], [0.75]])
    adjusted, exact = max_t_adjusted(d)
    # Five moved questions, 32 patterns, observed sum 2.25. At least as far from 0: the data, the -0.25 flipped
    # (2.75), the +0.25 and -0.25 both flipped (2.25), and the mirrors of these three -> 6 of 32.
    assert exact and adjusted[0] == pytest.approx(6 / 32)
    assert adjusted[0] == sign_flip_p_values(d)[0][0]


def test_unmoved_cells_and_copies_cost_nothing() -> None:
    rng = np.random.default_rng(0)
    moved = rng.choice([-0.5, 0.0, 0.5, 1.0], size=(30, 1), p=[0.1, 0.5, 0.2, 0.2])
    alone, _ = max_t_adjusted(moved, n_perm=4000, seed=1)
    # Twelve cells nobody touched beside it: unchanged, and each of them gets 1.
    beside_zeros, _ = max_t_adjusted(np.hstack([moved, np.zeros((30, 12))]), n_perm=4000, seed=1)
    assert beside_zeros[0] == alone[0] and (beside_zeros[1:] == 1.0).all()
    # The same change at three k (perfectly correlated cells) is one test, not three.
    copies, _ = max_t_adjusted(np.hstack([moved] * 3), n_perm=4000, seed=1)
    assert copies == pytest.approx([alone[0]] * 3)
    # Holm triples it.
    raw = sign_flip_p_values(np.hstack([moved] * 3), n_perm=4000, seed=1)[0]
    assert adjust_p_values(list(raw), "holm")[0] == pytest.approx(min(1.0, 3 * raw[0]))
    assert raw[0] == pytest.approx(alone[0], abs=0.01)


def test_missing_pairs_and_the_floor_at_the_raw_p_value() -> None:
    d = np.array([[1.0, np.nan], [1.0, 1.0], [1.0, 1.0], [1.0, np.nan], [1.0, 1.0]])
    adjusted, exact = max_t_adjusted(d)
    assert exact
    # Cell 0: all five up (2/32 alone); the max over both cells can only make it larger.
    assert adjusted[0] >= 2 / 32 and adjusted[1] >= adjusted[0]
    raw = sign_flip_p_values(np.array([[1.0], [1.0], [1.0]]))[0][0]
    assert joint_adjusted(d, [2 / 32, raw], n_perm=10000, seed=0)[1] >= raw


def _ranks(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    """Rank of a question's one relevant chunk: found with probability p, then geometric; 99 = missed."""
    return np.where(rng.random(p.shape) < p, rng.geometric(0.45, p.shape), 99)


def _ndcg(ranks: np.ndarray) -> np.ndarray:
    """nDCG@k of one relevant chunk at each k: discrete values, strongly correlated across k."""
    return np.column_stack([np.where(ranks <= k, 1 / np.log2(1 + ranks), 0.0) for k in KS])


def _comparison(rng: np.random.Generator, n: int, untouched: int, effect: float) -> np.ndarray:
    """Differences (n questions x 4 retrievers x 3 k) of a candidate run against its base: `untouched` retrievers
    return the same ranks, the others are re-run from the same per-question quality (noise), and the last one's
    quality is multiplied by 1 - effect (a regression when effect > 0)."""
    quality = rng.beta(2, 2, n)
    cells = []
    for r in range(4):
        base = _ranks(rng, quality)
        if r < untouched:
            cand = base
        else:
            cand = _ranks(rng, quality * (1 - effect if r == 3 else 1.0))
        cells.append(_ndcg(cand) - _ndcg(base))
    return np.hstack(cells)


def _false_worse_rates(n: int, untouched: int, effect: float, reps: int) -> tuple[float, float]:
    """The share of comparisons in which some cell is declared significantly worse: joint, Holm."""
    rng = np.random.default_rng([n, untouched, int(effect * 100)])
    joint = holm = 0
    for rep in range(reps):
        d = _comparison(rng, n, untouched, effect)
        worse = d.mean(axis=0) < 0
        raw, _ = sign_flip_p_values(d, n_perm=1000, seed=rep)
        p_joint = np.array(joint_adjusted(d, raw, n_perm=1000, seed=rep))
        p_holm = np.array(adjust_p_values(list(raw), "holm"))
        joint += np.any((p_joint < ALPHA) & worse)
        holm += np.any((p_holm < ALPHA) & worse)
    return joint / reps, holm / reps


@pytest.mark.parametrize(("n", "untouched"), [(15, 2), (40, 0)])
def test_false_worse_stays_at_or_below_alpha_under_no_change(n: int, untouched: int) -> None:
    reps = 1500
    joint, holm = _false_worse_rates(n, untouched, 0.0, reps)
    print(f"null n={n} untouched={untouched}: false worse joint {joint:.4f}, holm {holm:.4f} ({reps} comparisons)")
    # alpha plus three Monte-Carlo standard errors
    assert joint <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert holm <= joint + 1e-12  # Holm is the more conservative


@pytest.mark.parametrize(("n", "effect"), [(15, 0.7), (40, 0.5)])
def test_one_retriever_of_four_regresses_and_joint_finds_it_more_often_than_holm(n: int, effect: float) -> None:
    reps = 500
    # three retrievers untouched, the fourth regresses: the case of a broken service beside unchanged retrievers
    joint, holm = _false_worse_rates(n, 3, effect, reps)
    print(f"regression n={n} effect={effect}: detected joint {joint:.3f}, holm {holm:.3f} ({reps} comparisons)")
    assert joint >= holm + 0.1 and joint >= 1.5 * holm
