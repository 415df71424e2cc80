"""One Parquet IO manager for every table asset, local or on an object store (any fsspec / UPath URL).

Each output is written as a new version of its entry (table_store.py): `chunks`, or with hive-style partition parts
`retrieval_results/retriever=bm25`, `answers/retriever=bm25/k=10`. Readers see the versions named by current.json.
A run tagged with PIPELINE_TAG stages its versions (its own later loads see them) and they become current together
when the pipeline commits (defs/jobs.py: `rag-eval run`, a night's run); a run without the tag (a materialization from the UI,
a backfill run, `dg.materialize`) makes each output current as soon as it is written.
"""


import typing

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from rag_eval_assets.defs.storage.table_store import TableStore

# Asset metadata key naming the partition dimensions in path order (e.g. ["retriever", "k"]).
PARTITION_DIMENSIONS_KEY = "partition_dimensions"
# Run tag: the pipeline a run belongs to; every stage of one pipeline carries the same value.
PIPELINE_TAG = "rag_eval/pipeline"
# Output metadata key: the stored file (relative to the store) a materialization wrote.
STORED_AS = "stored_as"


def pipeline_of(context: dg.InputContext | dg.OutputContext) -> str | None:
    try:
        run = context.step_context.dagster_run
    except dg.DagsterInvariantViolationError:  # loaded outside a run (Definitions.load_asset_value)
        return None
    return pipeline_of_run(run, context.step_context.instance)


def pipeline_of_run(run: dg.DagsterRun, instance: dg.DagsterInstance) -> str | None:
    """The pipeline `run` belongs to; None for a run outside any (its outputs are current at once)."""
    if PIPELINE_TAG not in run.tags and run.root_run_id:
        # A re-execution started through the Python API does not copy its parent's tags: it belongs to the
        # pipeline of the run it re-executes.
        root = instance.get_run_by_id(run.root_run_id)
        return root.tags.get(PIPELINE_TAG) if root is not None else None
    return run.tags.get(PIPELINE_TAG)


def _declared_dimensions(context: dg.InputContext | dg.OutputContext) -> list[str]:
    # On load, the order is the one the producing asset declared, not the consumer's.
    owner = context.upstream_output if isinstance(context, dg.InputContext) else context
    return list((owner.definition_metadata or {}).get(PARTITION_DIMENSIONS_KEY) or [])


def _dimension_order(context: dg.InputContext | dg.OutputContext, names: list[str]) -> list[str]:
    declared = _declared_dimensions(context)
    return [n for n in declared if n in names] + sorted(n for n in names if n not in declared)


def entry_of(context: dg.InputContext | dg.OutputContext, partition_key: str | None) -> str:
    """`asset[/dimension=value...]`: dimensions in the producing asset's declared order, else alphabetical."""
    parts = list(context.asset_key.path)
    if partition_key is not None:
        partitions_def = context.asset_partitions_def
        if isinstance(partitions_def, dg.MultiPartitionsDefinition):
            values = partitions_def.get_partition_key_from_str(str(partition_key)).keys_by_dimension
            parts += [f"{name}={values[name]}" for name in _dimension_order(context, list(values))]
        else:
            parts.append(f"{(_declared_dimensions(context) or ['partition'])[0]}={partition_key}")
    return "/".join(parts)


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


class ParquetIOManager(dg.IOManager):
    def __init__(self, store: TableStore):
        self.store = store

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        name = context.asset_key.to_user_string() if context.has_asset_key else context.name
        if not context.has_asset_key:
            raise TypeError(f"{name}: this IO manager stores asset outputs only")
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{name}: expected a pandas DataFrame, got {type(obj)}")
        keys = context.asset_partition_keys if context.has_asset_partitions else [None]
        if len(keys) != 1:
            raise ValueError(f"{name}: one output holds one partition; launch backfills with one run per partition")
        entry = entry_of(context, keys[0])
        table = pa.Table.from_pandas(obj, preserve_index=False)  # fails before anything is written
        file = self.store.write(entry, table, context.run_id)
        pipeline = pipeline_of(context)
        if pipeline is None:
            self.store.commit_now(entry, file, f"run {context.run_id}")
        else:
            self.store.stage(pipeline, entry, file)
        columns = [dg.TableColumn(name=str(n), type=str(t)) for n, t in zip(obj.columns, obj.dtypes)]
        context.add_output_metadata({
            "dagster/row_count": dg.MetadataValue.int(len(obj)),
            "dagster/column_schema": dg.MetadataValue.table_schema(dg.TableSchema(columns=columns)),
            STORED_AS: dg.MetadataValue.text(file),
            "current": dg.MetadataValue.text("now" if pipeline is None else f"when pipeline {pipeline} commits"),
        })

    def load_input(self, context: dg.InputContext):
        if not context.has_asset_key:
            raise TypeError(f"{context.name}: this IO manager loads asset inputs only")
        if not context.has_asset_partitions:
            return _read(self._locate(context, None))
        keys = context.asset_partition_keys
        # An input annotated as a dict of partitions gets a LazyPartitions whatever the number of partitions (one
        # retriever is a valid grid); a single-partition input gets its table.
        if typing.get_origin(context.dagster_type.typing_type) is dict:
            return LazyPartitions({str(key): self._locate(context, key) for key in keys})
        if len(keys) == 1:
            return _read(self._locate(context, keys[0]))
        return {str(key): _read(self._locate(context, key)) for key in keys}

    def _locate(self, context: dg.InputContext, partition_key: str | None) -> UPath:
        entry = entry_of(context, partition_key)
        path = self.store.locate(entry, pipeline_of(context))
        if path is None:
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()}: no stored table {entry} in {self.store.base}; "
                "materialize it first"
            )
        return path


class ParquetIOManagerResource(dg.ConfigurableIOManagerFactory):
    """Configurable from the UI or YAML: `base_path` is a local directory or an object-store URL."""

    base_path: str

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetIOManager:
        return ParquetIOManager(TableStore(self.base_path))
