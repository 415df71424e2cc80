"""Sign patterns for sign-flip tests, exact or drawn, in blocks that bound memory whatever their number."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# Sign patterns per block: bounds memory at BLOCK x n floats whatever the number of patterns.
BLOCK = 2048


def is_exact(n: int, n_perm: int) -> bool:
    """Whether every sign pattern of n signs is enumerated rather than n_perm of them drawn."""
    return 2**n <= n_perm


def sign_blocks(n: int, n_perm: int, seed: int | list[int]) -> Iterator[np.ndarray]:
    """(b, n) blocks of +-1 patterns: all 2**n of them when that is at most n_perm (the identity among them), else
    n_perm drawn at random from `seed` (the identity not among them: the caller counts it)."""
    if is_exact(n, n_perm):
        codes = np.arange(2**n)
        for start in range(0, len(codes), BLOCK):
            yield ((codes[start:start + BLOCK, None] >> np.arange(n)) & 1) * 2.0 - 1.0
        return
    rng = np.random.default_rng(seed)
    for start in range(0, n_perm, BLOCK):
        size = min(BLOCK, n_perm - start)
        # Eight signs per random byte: drawing the patterns costs less than multiplying with them.
        bits = np.unpackbits(rng.integers(0, 256, size=(size, (n + 7) // 8), dtype=np.uint8), axis=1, count=n)
        yield bits * 2.0 - 1.0


def p_from_counts(extreme: np.ndarray, n: int, n_perm: int) -> np.ndarray:
    """p-values from the number of patterns at least as extreme as the data: a share of all 2**n patterns when
    enumerated, else (1 + extreme) / (1 + n_perm), which counts the data's own pattern and never reports 0 for a
    finite sample (Phipson & Smyth 2010)."""
    return extreme / 2**n if is_exact(n, n_perm) else (1 + extreme) / (1 + n_perm)
