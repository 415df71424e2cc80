"""What a reader of the table store sees: the current version of an entry (`chunks`, `answers/retriever=bm25/k=5`)."""

from pathlib import Path

import pandas as pd

from rag_eval_assets.defs.storage.table_store import STAGING, TableStore


def stored_table(assets_dir: Path | str, entry: str, pipeline: str | None = None) -> pd.DataFrame:
    """The current table, or what `pipeline` staged over it (a pipeline that failed commits nothing)."""
    path = TableStore(assets_dir).locate(entry, pipeline)
    assert path is not None, f"no current table {entry} in {assets_dir}"
    with path.open("rb") as f:
        return pd.read_parquet(f)


def newest_pipeline(assets_dir: Path | str) -> str:
    """The newest pipeline with staged (uncommitted) tables: rag-eval's pipeline ids start with their UTC time."""
    return max(p.name for p in (Path(assets_dir) / STAGING).iterdir())
