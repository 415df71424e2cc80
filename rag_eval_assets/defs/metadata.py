"""Metadata every asset records: the version tuple as JSON, and readable previews capped in size."""


import dagster as dg
import pandas as pd

from rag_eval_assets.runs.versions import VersionTuple

VERSION_TUPLE_KEY = "version_tuple"
# Dagster's UI slows down, and its storage refuses entries, when metadata grows large.
PREVIEW_ROWS = 10
PREVIEW_CELL_CHARS = 80


def upstream_versions(context: dg.AssetExecutionContext, *asset_keys: str) -> VersionTuple:
    """Merge the version tuples recorded by the latest materializations of the given upstream assets."""
    merged = VersionTuple()
    for key in asset_keys:
        event = context.instance.get_latest_materialization_event(dg.AssetKey.from_user_string(key))
        if event is None or event.asset_materialization is None:
            continue
        entry = event.asset_materialization.metadata.get(VERSION_TUPLE_KEY)
        if entry is not None:
            merged = merged.merge(VersionTuple.from_dict(entry.value))
    return merged


def version_metadata(versions: VersionTuple) -> dict[str, dg.MetadataValue]:
    return {
        VERSION_TUPLE_KEY: dg.MetadataValue.json(versions.as_dict()),
        "config_hash": dg.MetadataValue.text(versions.config_hash),
    }


def preview(df: pd.DataFrame, columns: list[str] | None = None) -> dg.MetadataValue:
    """The first PREVIEW_ROWS rows as Markdown, then a line saying how many more the asset's table holds."""
    head = df[columns] if columns else df
    head = head.head(PREVIEW_ROWS).copy()
    for col in head.columns:
        head[col] = head[col].map(lambda v: _cut(str(v)))
    text = head.to_markdown(index=False) if len(head) else "_empty_"
    if len(df) > PREVIEW_ROWS:
        text += f"\n\n_… {len(df) - PREVIEW_ROWS} more rows in this asset's Parquet table_"
    return dg.MetadataValue.md(text)


def _cut(text: str) -> str:
    text = text.replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"
