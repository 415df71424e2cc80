"""What a configuration fixes of a run: each part of its version tuple (runs/versions.py), and its config.json.

Every part is a pure function of the settings and the two input hashes (evalset sha256, corpus sha256), so two
runs with the same inputs and settings get the same tuple and `config_hash` whatever order their partitions ran in.
"""

from __future__ import annotations

from typing import Any

from rag_eval_assets.corpus.chunking import CHUNKER_VERSION
from rag_eval_assets.corpus.settings import ChunkingSettings
from rag_eval_assets.evalset.freeze import eval_set_version
from rag_eval_assets.generation.answerers import llm_answerer_version
from rag_eval_assets.generation.extractive import ExtractiveAnswerer
from rag_eval_assets.runs.contents import run_config
from rag_eval_assets.runs.reproducibility import reproducibility_fields
from rag_eval_assets.runs.store import PIPELINE_RUN_KEY
from rag_eval_assets.runs.versions import VersionTuple
from rag_eval_assets.settings import Settings

JUDGE_PROMPT_VERSION = "v1"


def dataset_part(s: Settings, evalset_sha256: str | None = None, corpus_sha256: str | None = None) -> dict[str, Any]:
    """The inputs an asset was computed from; a hash left out (None) is an input the asset does not read."""
    part: dict[str, Any] = {}
    if evalset_sha256 is not None:
        part.update(evalset_sha256=evalset_sha256, eval_set_version=eval_set_version(s.evalset.name, evalset_sha256))
    if corpus_sha256 is not None:
        part.update(corpus_sha256=corpus_sha256, corpus_id=s.corpus.id)
    return part


def chunking_part(s: Settings, chunking: ChunkingSettings | None = None) -> dict[str, Any]:
    """The chunks an asset was computed from: `chunking` (a variant's own), else the top-level one."""
    c = chunking or s.chunking
    return {"chunker_version": CHUNKER_VERSION, "chunk_size_chars": c.chunk_size_chars,
            "overlap_chars": c.overlap_chars}


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


def pipeline_run_config(s: Settings, versions: VersionTuple, dagster_run_id: str, pipeline_run_id: str) -> dict[str, Any]:
    """config.json: the version tuple, the settings (with each variant's version), the input hashes, the chunking,
    the Dagster run and its run group (`pipeline_run_id`, how a re-execution finds the directory to rewrite), and
    the reproducibility fields."""
    return run_config(
        versions,
        settings={"config_file": str(s.config_file), **s.model_dump(mode="json"),
                  "variants": {name: v.version() for name, v in s.variants.items()}},
        evalset_sha256=versions.dataset.get("evalset_sha256"),
        corpus_sha256=versions.dataset.get("corpus_sha256"),
        chunk_size_chars=s.chunking.chunk_size_chars,
        overlap_chars=s.chunking.overlap_chars,
        dagster_run_id=dagster_run_id,
        **{PIPELINE_RUN_KEY: pipeline_run_id},
        **reproducibility_fields(versions, s.answering.adapter_id),
    )
