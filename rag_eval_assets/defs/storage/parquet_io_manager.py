"""One Parquet IO manager for every table asset, local or on an object store (any fsspec / UPath URL).

Partitions get hive-style paths (`retriever=bm25/k=10`), one file per partition, so a backfill of one partition
rewrites one file and readers can load a single partition. Files are written to a temporary name and renamed,
so a failed run never leaves a half-written table in place of the previous one.
"""


import typing
import uuid

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

# Asset metadata key naming the partition dimensions in path order (e.g. ["retriever", "k"]).
PARTITION_DIMENSIONS_KEY = "partition_dimensions"


def _declared_dimensions(context: dg.InputContext | dg.OutputContext) -> list[str]:
    # On load, the order is the one the producing asset declared, not the consumer's.
    owner = context.upstream_output if isinstance(context, dg.InputContext) else context
    return list((owner.definition_metadata or {}).get(PARTITION_DIMENSIONS_KEY) or [])


def _dimension_order(context: dg.InputContext | dg.OutputContext, names: list[str]) -> list[str]:
    declared = _declared_dimensions(context)
    return [n for n in declared if n in names] + sorted(n for n in names if n not in declared)


class LazyPartitions(dict):
    """Partition key -> table, read from its file each time it is asked for and never kept, so a consumer that goes
    through the partitions one at a time holds one table in memory, not the whole grid. A dict subclass because
    Dagster type-checks `dict[str, DataFrame]` inputs with isinstance(dict)."""

    def __init__(self, paths: dict[str, UPath]):
        super().__init__(paths)

    def __getitem__(self, key: str) -> pd.DataFrame:
        return _read(super().__getitem__(key))

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def values(self):
        return (self[key] for key in self.keys())

    def items(self):
        return ((key, self[key]) for key in self.keys())


def _read(path: UPath) -> pd.DataFrame:
    with path.open("rb") as f:
        return pq.read_table(f).to_pandas()


class ParquetIOManager(dg.UPathIOManager):
    extension = ".parquet"

    def get_path_for_partition(
        self, context: dg.InputContext | dg.OutputContext, path: UPath, partition: str
    ) -> UPath:
        partitions_def = context.asset_partitions_def
        if isinstance(partitions_def, dg.MultiPartitionsDefinition):
            # UPathIOManager hands us the values joined by "/" in alphabetical dimension order.
            names = sorted(partitions_def.partition_dimension_names)
            values = dict(zip(names, partition.split("/"), strict=True))
            parts = [f"{name}={values[name]}" for name in _dimension_order(context, names)]
        else:
            declared = _declared_dimensions(context) or ["partition"]
            parts = [f"{declared[0]}={partition}"]
        return path.joinpath(*parts)

    def load_input(self, context: dg.InputContext):
        # A partition mapped to no upstream partition (a retriever that is not a service under test, reading
        # sut_responses) gets an empty mapping; Dagster would hand back None.
        if context.has_asset_partitions and not context.asset_partition_keys and \
                typing.get_origin(context.dagster_type.typing_type) is dict:
            return LazyPartitions({})
        return super().load_input(context)

    def load_partitions(self, context: dg.InputContext):
        # An input annotated as a dict of partitions gets a LazyPartitions whatever the number of partitions (one
        # retriever is a valid grid; Dagster would hand back a bare table); a single-partition input gets its table.
        if typing.get_origin(context.dagster_type.typing_type) is not dict:
            return super().load_partitions(context)
        paths = self._get_paths_for_partitions(context)
        missing = [str(path) for path in paths.values() if not path.exists()]
        if missing:
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()}: no stored table at {', '.join(missing)}; materialize it first"
            )
        return LazyPartitions({str(key): path for key, path in paths.items()})

    def dump_to_path(self, context: dg.OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a pandas DataFrame, got {type(obj)}")
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(obj, preserve_index=False)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with tmp.open("wb") as f:
            pq.write_table(table, f)
        tmp.rename(path)

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pd.DataFrame:
        if not path.exists():
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()}: no stored table at {path}; materialize it first"
            )
        return _read(path)

    def get_metadata(self, context: dg.OutputContext, obj: pd.DataFrame) -> dict[str, dg.MetadataValue]:
        columns = [
            dg.TableColumn(name=str(name), type=str(dtype)) for name, dtype in zip(obj.columns, obj.dtypes)
        ]
        return {
            "dagster/row_count": dg.MetadataValue.int(len(obj)),
            "dagster/column_schema": dg.MetadataValue.table_schema(dg.TableSchema(columns=columns)),
        }


class ParquetIOManagerResource(dg.ConfigurableIOManagerFactory):
    """Configurable from the UI or YAML: `base_path` is a local directory or an object-store URL."""

    base_path: str

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetIOManager:
        return ParquetIOManager(base_path=UPath(self.base_path))
