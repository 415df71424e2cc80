"""`sweep:` of rag_eval.yaml: grids of retriever parameters (chunking included) expanded into named variants.

A grid is a mapping with `kind`, an optional `name` (the prefix of the generated names, the kind by default) and the
kind's parameters: a list is the values to sweep, anything else a value every variant of the grid takes. A
parameter whose value is itself a list (a hybrid's `of`) is fixed as a list of one list. `chunking` lists chunkings
(mappings of chunk_size_chars, overlap_chars). The grid's variants are the product of its lists, in the order
written, each named after the values it takes: `bm25_k1-0.6_b-0.3_c400`. They join the `retrievers:` mapping as if
written there, so they are checked, versioned and run like any other variant; `sweep_max_variants` caps their
number, so that a typo cannot start a thousand partitions.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

Loc = tuple[str | int, ...]
CHUNKING = "chunking"
DEFAULT_MAX_VARIANTS = 64


def expand_sweep(raw: object, max_variants: int) -> tuple[dict[str, tuple[dict[str, Any], Loc]],
                                                          list[tuple[Loc, str]]]:
    """The variants `sweep:` generates: name -> (its `retrievers:` mapping entry, the grid's location), and
    (location, message) for every problem."""
    if raw is None:
        return {}, []
    grids = [raw] if isinstance(raw, Mapping) else raw
    if not isinstance(grids, list) or not grids:
        return {}, [(("sweep",), "expected a grid (a mapping with `kind`) or a non-empty list of grids")]
    problems: list[tuple[Loc, str]] = []
    out: dict[str, tuple[dict[str, Any], Loc]] = {}
    for i, grid in enumerate(grids):
        loc: Loc = ("sweep",) if isinstance(raw, Mapping) else ("sweep", i)
        if not isinstance(grid, Mapping) or not isinstance(grid.get("kind"), str):
            problems.append((loc, "a grid is a mapping with `kind` and the parameters to sweep"))
            continue
        swept = {key: value for key, value in grid.items() if key not in ("kind", "name") and isinstance(value, list)}
        empty = [key for key, values in swept.items() if not values]
        if empty:
            problems.extend(((*loc, key), "lists no value to sweep") for key in empty)
            continue
        fixed = {key: value for key, value in grid.items() if key != "name" and key not in swept}
        prefix = str(grid.get("name", grid["kind"]))
        for values in itertools.product(*swept.values()):
            chosen = dict(zip(swept, values))
            spec = {**fixed, **chosen}
            name = _name(prefix, chosen, swept.get(CHUNKING, []))
            if name in out:
                problems.append((loc, f"two of its variants would both be named {name!r}: list distinct values"))
                continue
            out[name] = (spec, loc)
    if len(out) > max_variants:
        problems.append((("sweep",), f"expands to {len(out)} variants, more than sweep_max_variants "
                                     f"({max_variants}): list fewer values or raise sweep_max_variants"))
    return out, problems


def _name(prefix: str, chosen: Mapping[str, Any], chunkings: list[Any]) -> str:
    parts = [prefix]
    for key, value in chosen.items():
        if key == CHUNKING:
            parts.append(_chunking_part(value, chunkings))
        elif not isinstance(value, list):  # a list-valued parameter fixed as a list of one list is not named
            parts.append(f"{key}-{value}")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "_".join(parts))


def _chunking_part(chunking: Any, chunkings: list[Any]) -> str:
    """`c400`, or `c400-50` when another listed chunking has the same size (or the value is no mapping: the
    settings check reports it)."""
    if not isinstance(chunking, Mapping):
        return f"c{chunking}"
    size = chunking.get("chunk_size_chars", "default")
    same_size = [c for c in chunkings if isinstance(c, Mapping) and c.get("chunk_size_chars", "default") == size]
    return f"c{size}" if len(same_size) < 2 else f"c{size}-{chunking.get('overlap_chars', 'default')}"
