"""The version tuple (DESIGN: Versions; seed 002 "treat every experiment as a tuple"; seed 003 section 6).

Every part is a pure function of the settings and the two input hashes (evalset sha256, corpus sha256), so two
runs with the same inputs and settings get the same tuple and `config_hash` whatever order their partitions ran in.
Each asset records the parts it depends on; the run records them all. `config_hash` is the sha256 of the canonical
JSON, so two runs with equal hashes were produced by the same data, index, retriever, answerer and judge.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from rag_eval_assets.corpus.chunking import CHUNKER_VERSION
from rag_eval_assets.evalset.freeze import eval_set_version
from rag_eval_assets.generation.answerers import llm_answerer_version
from rag_eval_assets.generation.extractive import ExtractiveAnswerer
from rag_eval_assets.settings import Settings

PARTS = ("dataset", "index", "retriever", "answerer", "judge")
JUDGE_PROMPT_VERSION = "v1"


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


def dataset_part(s: Settings, evalset_sha256: str | None = None, corpus_sha256: str | None = None) -> dict[str, Any]:
    """The inputs an asset was computed from; a hash left out (None) is an input the asset does not read."""
    part: dict[str, Any] = {}
    if evalset_sha256 is not None:
        part.update(evalset_sha256=evalset_sha256, eval_set_version=eval_set_version(s.evalset.name, evalset_sha256))
    if corpus_sha256 is not None:
        part.update(corpus_sha256=corpus_sha256, corpus_id=s.corpus.id)
    return part


def chunking_part(s: Settings) -> dict[str, Any]:
    return {"chunker_version": CHUNKER_VERSION, "chunk_size_chars": s.chunking.chunk_size_chars,
            "overlap_chars": s.chunking.overlap_chars}


def retriever_params(s: Settings, name: str) -> dict[str, Any]:
    """Everything retriever `name`'s results depend on besides the evalset, the chunks and its indexes: its own
    parameters (credentials redacted) and the search options. A change re-runs that retriever's partition only."""
    return {**s.variants[name].version(), "depth": max(s.k_values), "level": s.retrieval.level,
            "folder_filter": s.retrieval.folder_filter}


def answerer_part(s: Settings) -> dict[str, Any]:
    """The configured answerer of our retrievers' contexts (a service under test answers its own partitions)."""
    if s.answering.answerer == "llm" and s.llm_for("answerer") is not None:
        version = llm_answerer_version(s.llm_for("answerer").model)
    else:
        version = ExtractiveAnswerer(language=s.corpus.language, threshold=s.answering.extractive_threshold).version
    return {**version, "k_values": list(s.answering.k_values)}


def judge_part(s: Settings) -> dict[str, Any]:
    judge = s.llm_for("judge")
    if judge is None or not s.judge.enabled:
        return {}
    part = {"model": judge.model, "prompt_version": JUDGE_PROMPT_VERSION, "temperature": judge.temperature}
    if s.judge.replicates:
        # Recorded only when answers are re-judged (the spot-check), so that other runs keep their config_hash.
        part.update(replicates=s.judge.replicates, replicate_sample=s.judge.replicate_sample)
    return part


def run_versions(s: Settings, evalset_sha256: str | None, corpus_sha256: str | None) -> VersionTuple:
    """The whole tuple of a run: the same for the same settings and inputs, whatever ran last."""
    r = s.retrieval
    return VersionTuple(
        dataset=dataset_part(s, evalset_sha256, corpus_sha256),
        index=chunking_part(s),
        retriever={"retrievers": {name: v.version() for name, v in s.variants.items()},
                   "k_values": list(s.k_values), "level": r.level, "folder_filter": r.folder_filter},
        answerer=answerer_part(s),
        judge=judge_part(s),
    )
