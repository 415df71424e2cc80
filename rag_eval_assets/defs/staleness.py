"""What a run has to materialize, decided by Dagster's own stale status: the asset partitions that are MISSING or
STALE (a new code version, or an input whose data version changed since they were materialized), the fingerprint
assets whose files or settings changed, and what lies downstream of those within the same stage.

Four rules on top of Dagster's status:
- a materialization that never became current (its pipeline failed before committing, defs/storage/table_store.py)
  is redone: readers do not see it, so it cannot count as up to date;
- a retriever's partition (retrieval_results, answers) is not stale because of a new dependency on the chunks, gold
  labels or indexes of a chunking it does not search: every partition of an asset declares the same inputs, so a
  variant with a new chunking gives every existing partition a dependency it never reads (the UI shows those
  partitions unsynced, "has a new dependency"; nothing they read changed);
- `sut_responses` is materialized by every run: a service under test can change without any input of ours changing;
- `preflight` runs with every inputs step that materializes anything, and never because of itself (a pass changes no
  data version).

The UI's "unsynced" badges come from the same resolver over the same asset graph, so the CLI, a night's run and
the UI agree on what is stale (the first two rules are the pipeline's own and show in the CLI's listing).
"""

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleCauseCategory, StaleStatus
from dagster._time import get_current_datetime

from rag_eval_assets.defs.fingerprints import FINGERPRINTS, fingerprint
from rag_eval_assets.defs.inputs.corpus import chunk_set_key
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.defs.storage.parquet_io_manager import STORED_AS
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.retrieval.registry import needs_of
from rag_eval_assets.settings import Settings

Stage = tuple[str, dg.AssetSelection, list[str | None]]  # job, its assets, its partitions
ALWAYS = dg.AssetKey("sut_responses")
PREFLIGHT = preflight.key


@dataclass(frozen=True)
class Step:
    """One run: a job, its partition, and the assets it materializes (all of the job's when forced)."""

    job: str
    partition: str | None
    assets: tuple[dg.AssetKey, ...]


def stage_assets(asset_graph: BaseAssetGraph, selection: dg.AssetSelection) -> list[dg.AssetKey]:
    """The assets a job materializes, upstream first."""
    keys = selection.resolve(asset_graph)
    return [key for key in asset_graph.toposorted_asset_keys if key in keys]


def every_step(asset_graph: BaseAssetGraph, stages: Iterable[Stage]) -> list[Step]:
    """Every asset of every stage and partition: a forced run."""
    return [Step(job, partition, tuple(stage_assets(asset_graph, selection)))
            for job, selection, partitions in stages for partition in partitions]


class Planner:
    """Answers "does this asset partition need a run?" from one snapshot of the instance and of current.json (plus
    what `pipeline`, the pipeline asking, has staged)."""

    def __init__(self, asset_graph: BaseAssetGraph, settings: Settings, instance: dg.DagsterInstance,
                 pipeline: str | None = None):
        self.asset_graph, self.settings, self.instance = asset_graph, settings, instance
        view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                              instance=instance, asset_graph=asset_graph)
        # A fresh resolver (it caches what it reads), built as the webserver builds the UI's.
        self.resolver = CachingStaleStatusResolver(instance=instance, asset_graph=asset_graph, loading_context=view)
        # What `pipeline` (the one asking) reads, its base and what it wrote so far; else what readers see.
        self.current = set(TableStore(settings.assets_dir).tables(pipeline).values())
        self.chunk_set_of = chunk_set_assets_of(settings)

    def state(self, key: dg.AssetKey, partition: str | None) -> str | None:
        """Why (key, partition) needs a run, or None when it is up to date."""
        name = key.to_user_string()
        if name in FINGERPRINTS:
            recorded = self.resolver.get_current_data_version(key, partition)
            return None if recorded.value == fingerprint(self.settings, name, partition) else "changed"
        if key == ALWAYS:
            return "called every run"
        status = self.resolver.get_status(key, partition)
        if status != StaleStatus.FRESH and not self._only_unread_dependencies(key, partition):
            return status.value.lower()
        record = self.instance.get_latest_materialization_event(key) if partition is None else next(
            iter(self.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1).records), None)
        stored = record.asset_materialization.metadata.get(STORED_AS) if record and record.asset_materialization \
            else None
        if stored is not None and stored.value not in self.current:
            return "never committed"
        return None

    def _only_unread_dependencies(self, key: dg.AssetKey, partition: str | None) -> bool:
        """Whether (key, partition) is stale only by new dependencies on another chunking's assets than its
        retriever's."""
        retriever = _retriever_of(partition)
        if retriever not in self.settings.variants or self.resolver.get_status(key, partition) != StaleStatus.STALE:
            return False
        own = self.settings.variants[retriever].chunk_set
        causes = self.resolver.get_stale_causes(key, partition)
        return bool(causes) and all(
            cause.category == StaleCauseCategory.DEPENDENCIES and cause.reason.startswith("has a new dependency")
            and self.chunk_set_of.get(cause.dependency_asset_key, own) != own for cause in causes)

    def next_steps(self, stages: Iterable[Stage], done: Collection[tuple[str, str | None]] = ()) -> list[Step]:
        """The runs of the first stage that has anything to do: per partition, the assets that need a run and their
        descendants in that stage (their inputs are about to change), leaving out the (job, partition) pairs this
        pipeline already ran (`done`: each runs once per pipeline, so a service under test is called once and a
        pipeline always ends). Empty when everything is up to date."""
        for job, selection, partitions in stages:
            keys = stage_assets(self.asset_graph, selection)
            steps = []
            for partition in partitions:
                if (job, partition) in done:
                    continue
                selected = {key for key in keys if key != PREFLIGHT and self.state(key, partition) is not None}
                for key in keys:  # upstream first, so one pass collects every descendant
                    if any(parent in selected for parent in self.asset_graph.get(key).parent_keys):
                        selected.add(key)
                if selected and PREFLIGHT in keys:
                    selected.add(PREFLIGHT)
                if selected:
                    steps.append(Step(job, partition, tuple(key for key in keys if key in selected)))
            if steps:
                return steps
        return []

    def listing(self, stages: Iterable[Stage]) -> list[tuple[dg.AssetKey, str | None, str | None]]:
        """Every (asset, partition) the pipeline materializes, in pipeline order, with why it needs a run (None: up
        to date)."""
        return [(key, partition, None if key == PREFLIGHT else self.state(key, partition))
                for _, selection, partitions in stages for partition in partitions
                for key in stage_assets(self.asset_graph, selection)]


def chunk_set_assets_of(settings: Settings) -> dict[dg.AssetKey, str]:
    """Every asset of a chunking besides the top-level one (its chunks, gold labels, indexes) -> its chunk set."""
    out = {chunk_set_key(asset, chunk_set): chunk_set
           for chunk_set in settings.chunk_sets for asset in ("chunks", "gold_labels")}
    for need in needs_of(settings.variants, settings.corpus.language):
        if need.chunk_set:
            out[dg.AssetKey(list(need.family.asset_key(need)))] = need.chunk_set
    return out


def _retriever_of(partition: str | None) -> str | None:
    """The retriever of a retrieval_results or answers partition; None for an unpartitioned asset."""
    if isinstance(partition, dg.MultiPartitionKey):
        return partition.keys_by_dimension.get("retriever")
    return partition
