"""The corrections of p-values for testing several cells (or retrievers) at once, by name: the names rag_eval.yaml's
report.gate.correction accepts are this table's (verdict/settings.py reads them from here).

`joint` (the default) is the step-down max-T over sign flips of whole questions (verdict/joint.py): it needs the
differences themselves (a test without them shares alpha with the joint family Bonferroni-wise: `corrected`). The
marginal corrections see only the p-values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from rag_eval_assets.verdict.joint import max_t_adjusted

JOINT = "joint"


def _holm(p: np.ndarray) -> np.ndarray:
    """Step-down: p_(i) * (m - i + 1) made monotone (Holm 1979)."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    return adjusted


MARGINAL: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "holm": _holm,
    "bonferroni": lambda p: p * len(p),
    "none": lambda p: p,
}
CORRECTIONS: tuple[str, ...] = (JOINT, *MARGINAL)


def adjust_p_values(p_values: Iterable[float | None], method: str) -> list[float | None]:
    """Marginal p-values corrected for testing several cells at once (holm, bonferroni, none); None stays None and
    is not counted as a test."""
    if method not in MARGINAL:
        raise ValueError(f"correction must be one of {tuple(MARGINAL)} for marginal p-values, got {method!r}")
    values = list(p_values)
    tested = [i for i, p in enumerate(values) if p is not None]
    out: list[float | None] = list(values)
    if tested:
        adjusted = np.minimum(MARGINAL[method](np.array([values[i] for i in tested], dtype=float)), 1.0)
        for i, value in zip(tested, adjusted):
            out[i] = float(value)
    return out


def joint_adjusted(diffs: np.ndarray, p_values: Iterable[float], *, n_perm: int, seed: int) -> list[float]:
    """Step-down max-T adjusted p-values of the columns of an (questions x cells) matrix of differences (NaN where a
    question has no pair in a cell), never below the cell's own p-value (a drawn set of patterns can land either
    side of it)."""
    adjusted, _ = max_t_adjusted(diffs, n_perm=n_perm, seed=seed)
    return [float(max(a, p)) for a, p in zip(adjusted, p_values)]


def corrected(p_values: Sequence[float | None], diffs: Sequence[pd.Series | None], method: str, *, n_perm: int,
              seed: int) -> list[float | None]:
    """The p-values of several tests corrected by `method`; None (no test) stays None and is not counted. `diffs`:
    each test's (weighted) differences indexed by question, which the joint correction lines up by question so that
    a sign flip of a question flips its difference in every test at once; None for a test that has none (a
    calibrated cell, verdict/judged.py).

    Such a test cannot join the max-T, so under `joint` alpha is split Bonferroni-wise: of m tests, the j with
    differences share alpha * j / m jointly (their max-T p-values times m / j) and each other test gets alpha / m
    (its p-value times m). The union bound keeps the family-wise error rate at alpha; without such tests this is
    the plain joint correction."""
    if method != JOINT:
        return adjust_p_values(p_values, method)
    tested = [i for i, p in enumerate(p_values) if p is not None]
    joint = [i for i in tested if diffs[i] is not None]
    alone = [i for i in tested if diffs[i] is None]
    out: list[float | None] = [None] * len(p_values)
    if joint:
        matrix = pd.concat([diffs[i] for i in joint], axis=1).to_numpy(dtype=float)
        share = len(tested) / len(joint)
        for i, p in zip(joint, joint_adjusted(matrix, [p_values[i] for i in joint], n_perm=n_perm, seed=seed)):
            out[i] = min(p * share, 1.0)
    for i in alone:
        out[i] = min(p_values[i] * len(tested), 1.0)
    return out
