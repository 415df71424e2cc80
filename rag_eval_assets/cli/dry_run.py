"""`rag-eval run --dry-run`: the variants a configuration defines (a sweep's expanded), with the chunkings, indexes
and partitions the pipeline has for them; loads the configuration and starts nothing."""

from __future__ import annotations

from typing import Any

from rag_eval_assets.retrieval.registry import Variant, needs_of
from rag_eval_assets.settings import Settings

_NOT_PARAMETERS = ("name", "kind", "chunking", "of")


def dry_run_text(settings: Settings) -> str:
    """The variants, one line each (name, kind, chunking, parameters), then what the pipeline holds for them."""
    variants = settings.variants
    needs = needs_of(variants, settings.corpus.language)
    rows = [("variant", "kind", "chunking", "parameters")] + [
        (name, v.kind, settings.chunking_of(name).key, _parameters(v)) for name, v in variants.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row[:3], widths)), row[3]]).rstrip()
             for row in rows]
    chunkings = [f"{settings.chunking.key} (top-level: chunks, gold_labels)"] + [
        f"{key} (chunks/{key}, gold_labels/{key})" for key in settings.chunk_sets]
    answer_cells = len(variants) * len(settings.answering.k_values)
    lines += [
        "",
        f"{len(variants)} variants: {len(chunkings)} chunking{'s' if len(chunkings) != 1 else ''}, "
        f"{len(needs)} index{'es' if len(needs) != 1 else ''}, {len(variants)} retrieval partitions, "
        f"{answer_cells} answer partitions ({len(variants)} retrievers x {len(settings.answering.k_values)} k)",
        "chunkings: " + "; ".join(chunkings),
        "indexes: " + (", ".join("/".join(n.family.asset_key(n)) for n in needs) or "none"),
        "dry run: nothing was started; `rag-eval run` materializes only what is missing or stale",
    ]
    return "\n".join(lines)


def _parameters(variant: Variant) -> str:
    version: dict[str, Any] = variant.version()
    shown = [f"{key}={value}" for key, value in version.items() if key not in _NOT_PARAMETERS]
    if variant.parts:
        shown.insert(0, "of=" + "+".join(part.name for part in variant.parts))
    return " ".join(shown)
