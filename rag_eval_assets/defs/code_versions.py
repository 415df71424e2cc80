"""Every asset's code version: the version on its decorator (bump it when the asset's code changes what it
produces) plus a hash of the settings it reads, so that Dagster marks exactly the readers of a changed setting stale
("has a new code version"), in the CLI's plan and in the UI alike.

Settings that differ per partition cannot live here (a code version is the asset's, not a partition's): a
retriever's parameters reach its retrieval_results partition through the retriever_config asset instead. Values are
redacted before hashing: a URL's credentials never enter a code version, even hashed.
"""

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from rag_eval_assets.redaction import redact
from rag_eval_assets.runs.versions import fingerprint, plain
from rag_eval_assets.settings import Settings

SETTINGS_HASH_CHARS = 12


def _answering(s: Settings) -> dict[str, Any]:
    # k_values are the answer grid's partitions: a new k adds partitions, it does not change the existing ones.
    # The answerer's own llm is read through _llm (the one of its role).
    return {key: value for key, value in plain(s.answering).items() if key not in ("k_values", "llm")}


def _llm(s: Settings, role: str) -> Any:
    endpoint = s.llm_for(role)
    return plain(endpoint) if endpoint is not None else None


def _judged(s: Settings) -> bool:
    # Whether the judges ran: which judge metrics are listed as not computed.
    return s.judge.enabled and s.llm_for("judge") is not None


def _judging(s: Settings) -> dict[str, Any]:
    # How far a judge is trusted is the report's and the gate's reading of its scores: changing it re-judges nothing.
    return {key: value for key, value in plain(s.judge).items() if key not in ("trust_kappa", "min_grades", "llm")}


# asset -> the settings it reads. An asset missing here reads none (its inputs and fingerprints carry everything),
# or hashes them itself: an index asset hashes what its family reads (defs/retrieval/assets.py).
SETTINGS_READ: dict[str, Callable[[Settings], Any]] = {
    "evalset": lambda s: {"name": s.evalset.name, "format": s.evalset.format},
    "dev_subset": lambda s: plain(s.dev_subset),
    "chunks": lambda s: {"corpus_id": s.corpus.id, "chunking": plain(s.chunking)},
    "gold_labels": lambda s: {"strict_gold": s.evalset.strict_gold},
    "retrieval_metrics_per_query": lambda s: {"k_values": list(s.k_values), "level": s.retrieval.level,
                                              "folder_filter": s.retrieval.folder_filter,
                                              "retrievers": {n: v.kind for n, v in s.variants.items()}},
    "retrieval_metrics": lambda s: {"chunking": plain(s.chunking), "level": s.retrieval.level},
    "answers": lambda s: {"answering": _answering(s), "llm": _llm(s, "answerer"), "language": s.corpus.language},
    "judged_answers": lambda s: {"llm": _llm(s, "judge"), "judge": _judging(s)},
    "generated_queries": lambda s: {"llm": _llm(s, "query_generation"),
                                    "query_generation": plain(s.query_generation)},
    "answer_metrics_per_query": lambda s: {"dense": plain(s.retrieval.dense), "answering": _answering(s),
                                           "ragas": _llm(s, "ragas") if s.ragas.llm_metrics else None,
                                           "judge": _judged(s),
                                           "retrievers": {n: v.kind for n, v in s.variants.items()}},
    "answer_metrics": lambda s: {"chunking": plain(s.chunking), "judge": _judged(s),
                                 "adapter_id": s.answering.adapter_id},
    # The run directory and the comparison record the whole configuration.
    "evaluation_run": plain,
    "run_comparison": plain,
}


def code_version(spec: dg.AssetSpec, settings: Settings) -> str:
    if not spec.code_version:
        raise ValueError(f"asset {spec.key.to_user_string()} has no code_version on its decorator: every asset needs "
                         "one, or a changed asset would never be re-run")
    read = SETTINGS_READ.get(spec.key.to_user_string())
    return spec.code_version if read is None else with_settings_read(spec.code_version, read(settings))


def with_settings_read(code_version: str, read: Any) -> str:
    """`code_version` followed by a hash of the settings values `read`."""
    return f"{code_version}+{fingerprint(redact(read))[:SETTINGS_HASH_CHARS]}"


def with_code_versions(assets: Sequence[dg.AssetsDefinition], settings: Settings) -> list[dg.AssetsDefinition]:
    return list(dg.map_asset_specs(lambda spec: spec.replace_attributes(code_version=code_version(spec, settings)),
                                   assets))
