"""The version tuple (DESIGN: Versions; seed 002 "treat every experiment as a tuple"; seed 003 section 6) and the
hashes of canonical JSON it and the code versions are made of; configured_run.py makes each part from the settings.

Each asset records the parts it depends on; the run records them all. `config_hash` is the sha256 of the canonical
JSON, so two runs with equal hashes were produced by the same data, index, retriever, answerer and judge.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import BaseModel

PARTS = ("dataset", "index", "retriever", "answerer", "judge")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def plain(value: Any) -> Any:
    """A settings section (or the whole Settings) as JSON values."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else json.loads(json.dumps(value, default=str))


def fingerprint(value: Any) -> str:
    """sha256 of the canonical JSON of `value` (settings sections included): a data or code version."""
    return sha256_text(canonical_json(plain(value)))


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

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return asdict(self)

    @property
    def config_hash(self) -> str:
        return sha256_text(canonical_json(self.as_dict()))
