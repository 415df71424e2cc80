"""Metadata every asset records: the version tuple as JSON, and readable previews capped in size."""

import dagster as dg
import pandas as pd
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from rag_eval_assets.configured_run import dataset_part, run_versions
from rag_eval_assets.runs.contents import VERSION_TUPLE_KEY
from rag_eval_assets.runs.versions import VersionTuple, sha256_text
from rag_eval_assets.settings import Settings

# Dagster's UI slows down, and its storage refuses entries, when metadata grows large.
PREVIEW_ROWS = 10
PREVIEW_CELL_CHARS = 80
# The unpartitioned assets whose data version is the sha256 of an input: the evalset file and the corpus.
EVALSET = "evalset"
CORPUS = "corpus_documents"


def input_sha256(context: dg.AssetExecutionContext, key: str) -> str | None:
    """The sha256 an input asset (EVALSET, CORPUS) recorded as its data version at its latest materialization.
    Neither has partitions, so what is read does not depend on which partition of anything ran last."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey(key))
    if event is None or event.asset_materialization is None:
        return None
    return event.asset_materialization.tags.get(DATA_VERSION_TAG)


def dataset_versions(
    context: dg.AssetExecutionContext, s: Settings, *, evalset: bool = True, corpus: bool = True
) -> VersionTuple:
    """The dataset part of an asset that reads the evalset and/or the corpus; an asset adds its other parts from
    the pure functions of configured_run.py."""
    return VersionTuple(dataset=dataset_part(s, input_sha256(context, EVALSET) if evalset else None,
                                             input_sha256(context, CORPUS) if corpus else None))


def run_versions_of(context: dg.AssetExecutionContext, s: Settings) -> VersionTuple:
    """The run's whole version tuple: settings plus the evalset and corpus hashes, nothing else."""
    return run_versions(s, input_sha256(context, EVALSET), input_sha256(context, CORPUS))


def content_version(table: pd.DataFrame) -> dg.DataVersion:
    """A data version from a table's content: the assets that read it go stale only when the content differs."""
    return dg.DataVersion(sha256_text(table.to_json(orient="records", force_ascii=False)))


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
