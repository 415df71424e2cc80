"""`rag-eval evaluate` reads the tables through the IO manager, so an object-store storage_dir gives the same files
as a local one. memory:// lives in one process only: evaluate runs in this one."""

from __future__ import annotations

import fsspec
import pandas as pd

from rag_eval_assets.cli import main
from rag_eval_assets_tests.synthetic_beir import write_collection

OUTPUTS = ("metrics.json", "run.bm25.trec", "qrels.trec")


def _evaluate(collection, out, *storage: str) -> int:
    return main(["evaluate", "--corpus", str(collection), "--evalset", str(collection), "--out", str(out),
                 "--language", "en", "--retrievers", "bm25", "--k", "1,5,10", *storage])


def test_memory_and_file_urls_give_what_a_local_directory_gives(tmp_path):
    collection = write_collection(tmp_path / "beir")
    memory = f"memory://{tmp_path.name}/store"
    try:
        assert _evaluate(collection, tmp_path / "local") == 0
        assert _evaluate(collection, tmp_path / "memory", "--storage-dir", memory) == 0
        assert _evaluate(collection, tmp_path / "file", "--storage-dir", f"file://{tmp_path / 'file_store'}") == 0
        assert fsspec.filesystem("memory").find(f"{tmp_path.name}/store")  # the tables went there
    finally:
        fsspec.filesystem("memory").rm(f"{tmp_path.name}", recursive=True)
    assert (tmp_path / "local" / "store").is_dir()
    assert not (tmp_path / "memory" / "store").exists() and not (tmp_path / "file" / "store").exists()
    assert any((tmp_path / "file_store").rglob("*.parquet"))
    for name in OUTPUTS:
        local = (tmp_path / "local" / name).read_text(encoding="utf-8")
        assert len(local) > 100
        assert (tmp_path / "memory" / name).read_text(encoding="utf-8") == local
        assert (tmp_path / "file" / name).read_text(encoding="utf-8") == local
    per_query = pd.read_parquet(tmp_path / "local" / "per_query.parquet")
    assert per_query["query_id"].nunique() == 66
    for where in ("memory", "file"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / where / "per_query.parquet"), per_query)
