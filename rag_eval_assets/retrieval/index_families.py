"""Index families: the kinds of index retrievers search (BM25 term counts, dense vectors, ...), each described by
the hooks that build it from the chunks, store it as a table and load it back.

A retriever kind brings its family through its needs: every `IndexNeed` carries the `IndexFamily` that builds it, so
a kind with a new kind of index defines its family in its own module, and defs/ makes one index asset per need from
the hooks (defs/retrieval/assets.py) without knowing any family by name. Indexes are stored as tables so the Parquet
IO manager keeps them like every other asset (locally or on an object store); the chunk table passed to the hooks is
the one the retriever searches, whose row order the loaded index follows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache
from rag_eval_assets.retrieval.encoders import Encoder


@dataclass
class IndexEnv:
    """What building or loading an index may use besides its need and the chunks; opened and closed by its caller
    (index_env.py makes one from the settings)."""

    encoder: Callable[[Any], Encoder]  # the encoder of a model's settings; its errors name the configuration key
    embedding_cache: EmbeddingCache
    log: Callable[[str], None]


@dataclass(frozen=True)
class BuiltIndex:
    """A freshly built index, with what its asset records: `version`, the index part of the version tuple
    (analyzer=..., embedding_model=...), and `metadata` shown on the asset."""

    index: Any
    version: dict[str, str]
    metadata: dict[str, Any]


@dataclass(frozen=True, eq=False)
class IndexFamily:
    """One kind of index. `name` is its asset's name; with `keyed`, every need key is an asset of its own,
    `name/key` (one dense index per model and backend), otherwise the family is one asset."""

    name: str
    description: str  # the asset's description
    build: Callable[[IndexNeed, pd.DataFrame, IndexEnv], BuiltIndex]  # (need, chunks, env)
    to_table: Callable[[Any, pd.Series], pd.DataFrame]  # (index, the chunk ids of its rows)
    from_table: Callable[[pd.DataFrame, IndexNeed, pd.DataFrame, IndexEnv], Any]  # (table, need, chunks, env)
    # The index part of the version tuple of the retrievers that search the need, from the settings alone.
    version: Callable[[IndexNeed], dict[str, str]]
    keyed: bool = False
    # Settings the index is built from that its asset key does not name, hashed into its code version (so Dagster
    # marks it stale when they change); None: the key names everything.
    reads: Callable[[IndexNeed], Any] | None = None
    asset_kinds: frozenset[str] = frozenset({"pandas", "parquet"})  # the tags the asset shows
    # The device an index of the need is encoded on (a step on cuda asks a dask cluster for a GPU worker); None: the
    # family builds on the CPU.
    device: Callable[[IndexNeed], str] | None = None

    def asset_key(self, need: IndexNeed) -> tuple[str, ...]:
        """`name[/key][/chunk set]`: an index of the top-level chunking keeps the family's name (`bm25_index`), one
        of another chunking adds its key (`bm25_index/300-50`)."""
        key = (self.name, need.key) if self.keyed else (self.name,)
        return key + ((need.chunk_set,) if need.chunk_set else ())

    def input_name(self, need: IndexNeed) -> str:
        """The need's asset as an input name: an identifier, whatever characters the key has."""
        return re.sub(r"\W", "_", "__".join(self.asset_key(need)))


@dataclass(frozen=True, eq=False)
class IndexNeed:
    """An index a retriever searches: `family` builds it, `key` tells it apart from the family's other indexes (one
    dense index per model and backend), `spec` what it is built from, `chunk_set` the chunks it indexes when they
    are not the top-level chunking's (the registry sets it from the variant)."""

    family: IndexFamily
    key: str
    spec: Any
    chunk_set: str | None = None

    @property
    def name(self) -> str:
        return self.family.name


def from_tables(tables: Mapping[tuple[str, str], pd.DataFrame], chunks: pd.DataFrame,
                env: IndexEnv) -> Callable[[IndexNeed], Any]:
    """Indexes loaded from their stored tables (by (family name, key)) on first use, each once."""
    loaded: dict[tuple[str, str], Any] = {}

    def get(need: IndexNeed) -> Any:
        key = (need.name, need.key)
        if key not in loaded:
            loaded[key] = need.family.from_table(tables[key], need, chunks, env)
        return loaded[key]

    return get


def built_in_process(chunks: pd.DataFrame, env: IndexEnv) -> Callable[[IndexNeed], Any]:
    """Indexes built from the chunks on first use, each once, without storing them (the labeler's retrievers)."""
    built: dict[tuple[str, str], Any] = {}

    def get(need: IndexNeed) -> Any:
        key = (need.name, need.key)
        if key not in built:
            built[key] = need.family.build(need, chunks, env).index
        return built[key]

    return get
