"""The corpus part of rag_eval.yaml: `corpus:` (what is evaluated over) and `chunking:` (how it is cut)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StrictInt, StrictStr

from rag_eval_assets.retrieval.analyzers import LANGUAGES
from rag_eval_assets.settings_base import ConfigPath, Loc, Section, at_least


class CorpusSettings(Section):
    id: StrictStr
    path: ConfigPath
    language: Literal[*LANGUAGES] = "multi"  # analyzer


class ChunkingSettings(Section):
    chunk_size_chars: Annotated[StrictInt, at_least(1)] = 800
    overlap_chars: Annotated[StrictInt, at_least(0)] = 100

    @property
    def key(self) -> str:
        """`300-50`: names the chunks, gold labels and indexes of this chunking (`chunks/300-50`)."""
        return f"{self.chunk_size_chars}-{self.overlap_chars}"

    @classmethod
    def cross_field_problems(cls, data: dict) -> list[tuple[Loc, str]]:
        size, overlap = cls.valid_alone(data, "chunk_size_chars"), cls.valid_alone(data, "overlap_chars")
        if size is not None and overlap is not None and overlap >= size:
            return [(("overlap_chars",), f"must be < chunk_size_chars ({size}), got {overlap}")]
        return []
