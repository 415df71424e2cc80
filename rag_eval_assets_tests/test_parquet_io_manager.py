"""The Parquet IO manager: hive-style partition paths, round trips, metadata, missing partitions, atomic writes."""


import dagster as dg
import pandas as pd
import pytest
from upath import UPath

from rag_eval_assets.defs.storage.parquet_io_manager import PARTITION_DIMENSIONS_KEY, ParquetIOManagerResource

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


def test_multi_dimensional_partition_written_hive_style_and_read_back(tmp_path):
    result = dg.materialize([grid_table, grid_copy], partition_key=_key("bm25", "10"), resources=_resources(tmp_path))
    assert result.success
    written = tmp_path / "grid_table" / "retriever=bm25" / "k=10.parquet"
    assert written.is_file()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.parquet")) == [
        "grid_copy/k=10/retriever=bm25.parquet",  # no declared order: alphabetical dimensions
        "grid_table/retriever=bm25/k=10.parquet",
    ]
    copied = pd.read_parquet(tmp_path / "grid_copy" / "k=10" / "retriever=bm25.parquet")
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
    assert "retriever=dense/k=10.parquet" in str(info.value)
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
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.parquet"))
    assert files == ["per_retriever/retriever=bm25.parquet", "per_retriever/retriever=hybrid.parquet"]


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
    assert pd.read_parquet(tmp_path / "fragile.parquet")["a"].tolist() == [1, 2, 3]
    assert [p.name for p in tmp_path.iterdir()] == ["fragile.parquet"]  # no temporary file left behind


def test_object_store_style_url_is_accepted(tmp_path):
    # The base path is a UPath: a "file://" URL goes through fsspec exactly as s3:// or gs:// would.
    url = UPath(tmp_path.as_uri())
    result = dg.materialize([per_retriever], partition_key="dense", resources=_resources(url))
    assert result.success
    assert (tmp_path / "per_retriever" / "retriever=dense.parquet").is_file()


def test_dict_inputs_are_lazy_one_table_at_a_time(tmp_path):
    from rag_eval_assets.defs.storage.parquet_io_manager import LazyPartitions

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
