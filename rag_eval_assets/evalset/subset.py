"""Deterministic stratified dev subsets (seed 003's dev100 gate runs on one)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import fields

from rag_eval_assets.evalset.schema import Question

QUESTION_FIELDS = frozenset(f.name for f in fields(Question))
Stratum = tuple[object, ...]


def dev_subset(
    questions: Sequence[Question], size: int, seed: int = 0, strata: Sequence[str] = ("type", "category")
) -> list[Question]:
    """`size` questions sampled per stratum (the values of the `strata` fields) in proportion to its share,
    largest remainder first; every stratum gets at least one when `size` allows. Returned in input order.

    Each stratum samples with its own random.Random seeded from `seed` and the stratum, so the result
    depends only on the inputs, not on the machine or on the other strata's draws."""
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    unknown = [name for name in strata if name not in QUESTION_FIELDS]
    if unknown:
        raise ValueError(f"unknown Question field(s) for strata: {', '.join(unknown)}")
    if size >= len(questions):
        return list(questions)
    members: dict[Stratum, list[int]] = {}
    for index, q in enumerate(questions):
        members.setdefault(tuple(getattr(q, name) for name in strata), []).append(index)
    order = sorted(members, key=_sort_key)
    allocation = _allocate(size, [len(members[key]) for key in order])
    chosen: list[int] = []
    for key, count in zip(order, allocation, strict=True):
        chosen.extend(random.Random(f"{seed}|{key!r}").sample(members[key], count))
    return [questions[i] for i in sorted(chosen)]


def _sort_key(stratum: Stratum) -> list[tuple[bool, str]]:
    # None (an unset field) sorts first; values compare as text so mixed types never fail to sort.
    return [(value is not None, str(value)) for value in stratum]


def _allocate(size: int, counts: list[int]) -> list[int]:
    """Largest-remainder apportionment of `size` over strata of `counts` (size < sum(counts)), then one
    for every empty-handed stratum, taken from the stratum most over its exact quota."""
    total = sum(counts)
    quotas = [size * n / total for n in counts]
    allocation = [math.floor(q) for q in quotas]
    by_remainder = sorted(range(len(counts)), key=lambda i: (-(quotas[i] - allocation[i]), i))
    for i in by_remainder[: size - sum(allocation)]:
        allocation[i] += 1
    if size >= len(counts):
        for i in range(len(counts)):
            if allocation[i] == 0:
                donors = [j for j in range(len(counts)) if allocation[j] > 1]
                donor = max(donors, key=lambda j: (allocation[j] - quotas[j], -j))
                allocation[donor] -= 1
                allocation[i] = 1
    return allocation
