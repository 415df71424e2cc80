"""Anchor gold shared by several formats: seed 002 gold_supports and seed 003 source_map entries."""

from __future__ import annotations

from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.schema import GoldSupport, SourceRef


def read_gold_supports(f: Fields) -> tuple[GoldSupport, ...]:
    """gold_supports: [{rel_path, heading_path?, snippets?}]; an empty snippet would match every chunk."""
    supports: list[GoldSupport] = []
    for item in f.objects("gold_supports"):
        rel_path = item.text("rel_path", required=True, nonblank=True)
        heading_path = item.text("heading_path") or ""
        snippets = item.texts("snippets", nonblank=True)
        if rel_path is not None:
            supports.append(GoldSupport(rel_path, heading_path, snippets))
    return tuple(supports)


def read_source_map(f: Fields, *, required: bool = False) -> tuple[SourceRef, ...]:
    """source_map entries, either {file, page?, anchors?} or {"refs": [{file, page?, anchors?}]}, flattened."""
    refs: list[SourceRef] = []
    for entry in f.objects("source_map", required=required):
        if "refs" in entry.obj:
            if "file" in entry.obj:
                entry.problem("file", "an entry holds either refs or file, not both")
            for ref in entry.objects("refs", required=True):
                refs.extend(_source_ref(ref))
        else:
            refs.extend(_source_ref(entry))
    return tuple(refs)


def _source_ref(f: Fields) -> list[SourceRef]:
    file = f.text("file", required=True, nonblank=True)
    page = f.optional_int("page")
    anchors = f.texts("anchors", nonblank=True)
    return [] if file is None else [SourceRef(file, page, anchors)]
