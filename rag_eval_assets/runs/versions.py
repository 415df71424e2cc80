"""The version tuple (DESIGN: Versions; seed 002 "treat every experiment as a tuple"; seed 003 section 6).

Each stage of the pipeline fills the parts it knows; the rest stay empty. `config_hash` is the sha256 of the
canonical JSON, so two runs with equal hashes were produced by the same data, index, retriever, answerer and judge.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

PARTS = ("dataset", "index", "retriever", "answerer", "judge")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class VersionTuple:
    dataset: dict[str, Any] = field(default_factory=dict)  # evalset_sha256, eval_set_version, corpus_sha256
    index: dict[str, Any] = field(default_factory=dict)  # chunker version and params, analyzer, embedding model
    retriever: dict[str, Any] = field(default_factory=dict)  # name and parameters
    answerer: dict[str, Any] = field(default_factory=dict)  # model, prompt sha256
    judge: dict[str, Any] = field(default_factory=dict)  # model, prompt version, temperature

    def with_part(self, part: str, **values: Any) -> VersionTuple:
        if part not in PARTS:
            raise ValueError(f"unknown version part {part!r}; valid: {', '.join(PARTS)}")
        return replace(self, **{part: {**getattr(self, part), **values}})

    def merge(self, other: VersionTuple) -> VersionTuple:
        merged = self
        for part in PARTS:
            merged = merged.with_part(part, **getattr(other, part))
        return merged

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VersionTuple:
        return cls(**{part: dict(data.get(part) or {}) for part in PARTS})

    @property
    def config_hash(self) -> str:
        return sha256_text(canonical_json(self.as_dict()))
