"""Seed 003's reproducibility fields, read off a run's version tuple."""

from __future__ import annotations

from typing import Any

from rag_eval_assets.runs.versions import VersionTuple, canonical_json, sha256_text


def reproducibility_fields(versions: VersionTuple, adapter_id: str | None = None) -> dict[str, Any]:
    """prompt_sha256, prompt_version, index_version, model_id, adapter_id and eval_set_version (seed 003, section 6).

    index_version hashes the index part of the tuple (chunker, its parameters, analyzer, embedding model), so two runs
    with equal index_version searched the same index. model_id is the answering model, or the answerer's name when no
    model answers (extractive, a service under test).
    """
    answerer = versions.answerer
    return {
        "prompt_sha256": answerer.get("prompt_sha256"),
        "prompt_version": answerer.get("prompt"),
        "index_version": sha256_text(canonical_json(versions.index))[:16],
        "model_id": answerer.get("model") or answerer.get("answerer"),
        "adapter_id": adapter_id,
        "eval_set_version": versions.dataset.get("eval_set_version"),
    }
