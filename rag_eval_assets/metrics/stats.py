"""Percentile bootstrap confidence intervals for per-question means."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def bootstrap_ci(values: ArrayLike, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> tuple[float, float]:
    """The (alpha/2, 1 - alpha/2) percentiles of the means of `n_boot` resamples (with replacement) of `values`."""
    low, high = bootstrap_ci_columns(np.asarray(values, dtype=float).reshape(-1, 1), n_boot, seed, alpha)
    return float(low[0]), float(high[0])


def bootstrap_ci_columns(
    values: ArrayLike, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """bootstrap_ci of every column of an (n, m) matrix at once.

    The resamples depend only on (n, n_boot, seed): row i of every column is drawn together, so two columns holding
    two retrievers' values for the same questions in the same order get a paired bootstrap, and a column's interval
    is the same whether it is computed alone or beside others.
    """
    matrix = np.asarray(values, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"expected an (n, m) matrix, got shape {matrix.shape}")
    if n_boot < 1 or not 0 < alpha < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < alpha < 1, got n_boot={n_boot}, alpha={alpha}")
    n, m = matrix.shape
    if n == 0:
        return np.full(m, np.nan), np.full(m, np.nan)
    draws = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    # How often each row is drawn in each resample: one matrix product then gives every column's resample means
    # without materialising an (n_boot, n, m) gather.
    counts = np.bincount((draws + n * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * n).reshape(n_boot, n)
    means = counts @ matrix / n
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    return low, high
