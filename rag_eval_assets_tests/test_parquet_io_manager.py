"""The Parquet IO manager: hive-style entries, round trips, metadata, missing partitions, versions that become current
at once outside a pipeline and only on commit inside one, and the garbage they leave."""


import json
from datetime import datetime, timedelta, timezone

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from upath import UPath

from rag_eval_assets.defs.storage.parquet_io_manager import (
    PARTITION_DIMENSIONS_KEY,
    PIPELINE_TAG,
    LazyPartitions,
    ParquetIOManagerResource,
)
from rag_eval_assets.defs.storage.table_store import CURRENT, STAGING, CommitConflict, TableStore, version_name

GRID = dg.MultiPartitionsDefinition(
    {"retriever": dg.StaticPartitionsDefinition(["bm25", "dense"]), "k": dg.StaticPartitionsDefinition(["5", "10"])}
)


@dg.asset(partitions_def=GRID, metadata={PARTITION_DIMENSIONS_KEY: ["retriever", "k"]})
def grid_table(context: dg.AssetExecutionContext) -> pd.DataFrame:
    key = context.partition_key.keys_by_dimension
    return pd.DataFrame({"retriever": [key["retriever"]] * 2, "k": [int(key["k"])] * 2, "rank": [1, 2]})


@dg.asset(partitions_def=GRID)
def grid_copy(grid_table: pd.DataFrame) -> pd.DataFrame:
    return grid_table.assign(copied=True)


@dg.asset(ins={"grid_table": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
def grid_summary(grid_table: dict[str, pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(grid_table.values(), ignore_index=True)


RETRIEVERS = dg.StaticPartitionsDefinition(["bm25", "dense", "hybrid"])


@dg.asset(partitions_def=RETRIEVERS, metadata={PARTITION_DIMENSIONS_KEY: ["retriever"]})
def per_retriever(context: dg.AssetExecutionContext) -> pd.DataFrame:
    return pd.DataFrame({"retriever": [context.partition_key], "score": [0.5]})


def _resources(base):
    return {"io_manager": ParquetIOManagerResource(base_path=str(base))}


def _key(retriever: str, k: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"retriever": retriever, "k": k})


def _current(base) -> dict[str, str]:
    return TableStore(base).current()["tables"]


def _table(base, entry: str) -> pd.DataFrame:
    with TableStore(base).locate(entry).open("rb") as f:
        return pd.read_parquet(f)


def _versions(base) -> list[str]:
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*.parquet"))


def test_multi_dimensional_partition_written_hive_style_and_read_back(tmp_path):
    result = dg.materialize([grid_table, grid_copy], partition_key=_key("bm25", "10"), resources=_resources(tmp_path))
    assert result.success
    current = _current(tmp_path)
    assert sorted(current) == [
        "grid_copy/k=10/retriever=bm25",  # no declared order: alphabetical dimensions
        "grid_table/retriever=bm25/k=10",
    ]
    assert _versions(tmp_path) == sorted(current.values())  # one version each, under its entry
    assert all(file.startswith(entry + "/") for entry, file in current.items())
    copied = _table(tmp_path, "grid_copy/k=10/retriever=bm25")
    assert copied.to_dict("list") == {"retriever": ["bm25", "bm25"], "k": [10, 10], "rank": [1, 2], "copied": [True, True]}


def test_metadata_records_row_count_and_column_schema(tmp_path):
    result = dg.materialize([grid_table], partition_key=_key("dense", "5"), resources=_resources(tmp_path))
    (mat,) = [e.materialization for e in result.get_asset_materialization_events()]
    assert mat.metadata["dagster/row_count"].value == 2
    schema = mat.metadata["dagster/column_schema"].value
    assert [(c.name, c.type) for c in schema.columns] == [("retriever", "str"), ("k", "int64"), ("rank", "int64")]


def test_missing_partition_fails_with_its_path(tmp_path):
    dg.materialize([grid_table], partition_key=_key("bm25", "5"), resources=_resources(tmp_path))
    with pytest.raises(Exception) as info:
        dg.materialize(
            [grid_table.to_source_assets()[0], grid_copy],
            partition_key=_key("dense", "10"),
            resources=_resources(tmp_path),
        )
    assert "grid_table/retriever=dense/k=10" in str(info.value)
    assert "materialize it first" in str(info.value)


def test_downstream_reads_all_partitions_one_file_each(tmp_path):
    for r in ("bm25", "dense"):
        for k in ("5", "10"):
            dg.materialize([grid_table], partition_key=_key(r, k), resources=_resources(tmp_path))
    result = dg.materialize([grid_table.to_source_assets()[0], grid_summary], resources=_resources(tmp_path))
    summary = result.output_for_node("grid_summary")
    assert sorted(zip(summary["retriever"], summary["k"])) == sorted(
        [(r, k) for r in ("bm25", "dense") for k in (5, 10)] * 2
    )


def test_single_dimension_partitions_use_declared_name(tmp_path):
    for r in ("bm25", "hybrid"):
        dg.materialize([per_retriever], partition_key=r, resources=_resources(tmp_path))
    assert sorted(_current(tmp_path)) == ["per_retriever/retriever=bm25", "per_retriever/retriever=hybrid"]


def test_failed_write_keeps_previous_table(tmp_path):
    @dg.asset(name="fragile")
    def good() -> pd.DataFrame:
        return pd.DataFrame({"a": [1, 2, 3]})

    @dg.asset(name="fragile")
    def unserialisable() -> pd.DataFrame:
        return pd.DataFrame({"a": [object()]})  # pyarrow cannot store this

    assert dg.materialize([good], resources=_resources(tmp_path)).success
    result = dg.materialize([unserialisable], resources=_resources(tmp_path), raise_on_error=False)
    assert not result.success
    assert _table(tmp_path, "fragile")["a"].tolist() == [1, 2, 3]
    assert _versions(tmp_path) == [_current(tmp_path)["fragile"]]  # nothing else written


@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_object_store_style_url_is_accepted(tmp_path, scheme):
    # The base path is a UPath: file:// and memory:// go through fsspec exactly as s3:// or gs:// would.
    url = UPath(tmp_path.as_uri()) if scheme == "file" else UPath(f"memory://{tmp_path.name}/assets")
    for retriever in ("dense", "bm25"):
        assert dg.materialize([per_retriever], partition_key=retriever, resources=_resources(url)).success
    assert sorted(_current(url)) == ["per_retriever/retriever=bm25", "per_retriever/retriever=dense"]
    assert _table(url, "per_retriever/retriever=dense")["retriever"].tolist() == ["dense"]


def test_dict_inputs_are_lazy_one_table_at_a_time(tmp_path):

    paths = {}
    for name in ("bm25", "dense"):
        paths[name] = UPath(tmp_path / f"{name}.parquet")
        pd.DataFrame({"retriever": [name]}).to_parquet(paths[name])
    lazy = LazyPartitions(paths)
    assert isinstance(lazy, dict) and sorted(lazy) == ["bm25", "dense"]
    assert all(isinstance(dict.__getitem__(lazy, k), UPath) for k in lazy)  # holds paths, not tables
    pd.DataFrame({"retriever": ["dense-v2"]}).to_parquet(paths["dense"])
    assert lazy["dense"]["retriever"].tolist() == ["dense-v2"]  # read when asked for
    assert [t["retriever"].item() for t in lazy.values()] == ["bm25", "dense-v2"]


def test_dict_input_with_one_partition_is_still_a_dict(tmp_path):
    @dg.asset(ins={"per_retriever": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
    def combined(per_retriever: dict[str, pd.DataFrame]) -> pd.DataFrame:
        return pd.DataFrame({"keys": sorted(per_retriever)})

    one = dg.StaticPartitionsDefinition(["bm25"])

    @dg.asset(name="per_retriever", partitions_def=one, metadata={PARTITION_DIMENSIONS_KEY: ["retriever"]})
    def single(context: dg.AssetExecutionContext) -> pd.DataFrame:
        return pd.DataFrame({"retriever": [context.partition_key]})

    dg.materialize([single], partition_key="bm25", resources=_resources(tmp_path))
    result = dg.materialize([single.to_source_assets()[0], combined], resources=_resources(tmp_path))
    assert result.output_for_node("combined")["keys"].tolist() == ["bm25"]


def _one_value_asset(value: str) -> dg.AssetsDefinition:
    @dg.asset(name="table")
    def table() -> pd.DataFrame:
        return pd.DataFrame({"value": [value]})

    return table


@dg.asset(deps=["table"])
def reader(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(read=True)


def _pipeline(name: str) -> dict[str, str]:
    return {PIPELINE_TAG: name}


def test_a_pipeline_stages_its_versions_and_readers_see_them_only_after_the_commit(tmp_path):
    store = TableStore(tmp_path)
    assert dg.materialize([_one_value_asset("v1")], resources=_resources(tmp_path)).success  # no pipeline: current
    assert _table(tmp_path, "table")["value"].tolist() == ["v1"]
    before = (tmp_path / CURRENT).read_bytes()

    assert dg.materialize([_one_value_asset("v2")], resources=_resources(tmp_path), tags=_pipeline("p2")).success
    assert (tmp_path / CURRENT).read_bytes() == before  # readers still see v1
    assert _table(tmp_path, "table")["value"].tolist() == ["v1"]
    assert sorted(store.staged("p2")) == ["table"]
    # A later stage of the same pipeline reads the staged version; a run outside it reads the current one.
    source = _one_value_asset("unused").to_source_assets()[0]
    inside = dg.materialize([source, reader], resources=_resources(tmp_path), tags=_pipeline("p2"))
    assert inside.output_for_node("reader")["value"].tolist() == ["v2"]
    outside = dg.materialize([source, reader], resources=_resources(tmp_path))
    assert outside.output_for_node("reader")["value"].tolist() == ["v1"]

    assert store.commit("p2") == ["reader", "table"]
    assert _table(tmp_path, "table")["value"].tolist() == ["v2"]
    assert store.staged("p2") == {} and store.commit("p2") == []  # committing twice changes nothing
    current = store.current()
    assert current["pipeline"] == "p2" and current["previous"]["table"].startswith("table/")

    # A third version keeps the previous generation and deletes the one before it.
    v1 = (tmp_path / current["previous"]["table"])
    assert dg.materialize([_one_value_asset("v3")], resources=_resources(tmp_path), tags=_pipeline("p3")).success
    store.commit("p3")
    assert not v1.exists()
    table_versions = [v for v in _versions(tmp_path) if v.startswith("table/")]
    assert table_versions == sorted([store.current()["tables"]["table"], store.current()["previous"]["table"]])


def test_a_commit_collects_orphans_older_than_a_day_and_staging_abandoned_for_a_week(tmp_path):
    old = datetime.now(timezone.utc) - timedelta(days=8)
    frame = pd.DataFrame({"value": ["x"]})
    orphans = {}
    for label, when in (("old", old), ("fresh", datetime.now(timezone.utc))):
        orphans[label] = tmp_path / "table" / f"{version_name(label, when)}.parquet"
        orphans[label].parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(orphans[label])
    abandoned = tmp_path / STAGING / "failed-night" / "table.json"
    abandoned.parent.mkdir(parents=True)
    abandoned.write_text(json.dumps({"file": orphans["old"].relative_to(tmp_path).as_posix(),
                                     "staged_at": old.isoformat(timespec="seconds")}))
    assert dg.materialize([_one_value_asset("v1")], resources=_resources(tmp_path)).success  # a commit
    assert not orphans["old"].exists() and not abandoned.parent.exists()
    assert orphans["fresh"].exists()  # may be a run's write in progress


def test_a_commit_survives_the_staging_folder_vanishing_under_its_garbage_collection(tmp_path, monkeypatch):
    # On S3 `_staging` is only its objects' common prefix: another pipeline's commit can drop the last of them between
    # a look and the listing (test_storage_s3's two runs at the same moment met it). Fault injection: the staging
    # folder looks present and lists as gone.
    path_type = type(UPath(tmp_path))
    exists = path_type.exists
    monkeypatch.setattr(path_type, "exists", lambda self, *a, **k: self.name == STAGING or exists(self, *a, **k))
    store = TableStore(tmp_path)
    store._collect_garbage()  # no FileNotFoundError: nothing is staged, nothing is collected
    assert store._pinned() == ([], set())


def test_a_pipeline_reads_one_snapshot_and_fails_clearly_rather_than_commit_beside_another_runs_tables(tmp_path):
    store = TableStore(tmp_path)

    def version(entry: str, value: str, run: str) -> str:
        return store.write(entry, pa.table({"value": [value]}), run)

    def values(pipeline: str | None) -> dict[str, str]:
        return {entry: pq.read_table(store.locate(entry, pipeline))["value"][0].as_py()
                for entry in ("chunks", "answers")}

    store.commit_now("chunks", version("chunks", "c0", "first"), "first")
    store.commit_now("answers", version("answers", "a0", "first"), "first")
    # p (recomputes the answers only) and r (recomputes everything) read the tables as they are now.
    assert values("p") == values("r") == {"chunks": "c0", "answers": "a0"}
    # Meanwhile q and then s recompute everything and commit.
    for other in ("q", "s"):
        store.stage(other, "chunks", version("chunks", f"c-{other}", other))
        store.stage(other, "answers", version("answers", f"a-{other}", other))
        assert store.commit(other) == ["answers", "chunks"]
    assert values(None) == {"chunks": "c-s", "answers": "a-s"}
    # p and r still read their snapshot; its files are kept while they may read them, though out of current.json.
    assert values("p") == values("r") == {"chunks": "c0", "answers": "a0"}
    c0 = store.pinned_base("p")["tables"]["chunks"]
    assert c0 not in {*store.current()["tables"].values(), *store.current()["previous"].values()}

    # p's answers beside s's chunks would be two runs mixed: nothing of p is committed, and it says why.
    store.stage("p", "answers", version("answers", "a-p", "p"))
    before = (tmp_path / CURRENT).read_bytes()
    with pytest.raises(CommitConflict) as info:
        store.commit("p")
    assert str(info.value) == (
        "pipeline p was not committed: since it read the tables (generation 2), other commits changed chunks, "
        "which it did not recompute (now generation 4, last by s). Its tables beside those would mix two runs: "
        "run it again")
    assert (tmp_path / CURRENT).read_bytes() == before
    assert sorted(store.staged("p")) == ["answers"]  # kept: committing it again fails the same way
    with pytest.raises(CommitConflict):
        store.commit("p")

    # r recomputed every table the others changed: its commit replaces them all, so every table is r's.
    store.stage("r", "chunks", version("chunks", "c-r", "r"))
    store.stage("r", "answers", version("answers", "a-r", "r"))
    assert store.commit("r") == ["answers", "chunks"]
    assert values(None) == {"chunks": "c-r", "answers": "a-r"} and store.current()["pipeline"] == "r"
    assert not (tmp_path / STAGING / "r").exists()
    assert (tmp_path / c0).exists()  # p's staging still names it


def test_a_pipeline_with_nothing_to_write_leaves_no_staging(tmp_path):
    store = TableStore(tmp_path)
    store.commit_now("chunks", store.write("chunks", pa.table({"value": ["c0"]}), "first"), "first")
    assert store.tables("p") == store.current()["tables"]  # pins p's base
    assert (tmp_path / STAGING / "p").exists()
    assert store.commit("p") == [] and not (tmp_path / STAGING / "p").exists()
