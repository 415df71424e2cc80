"""Indexes, per-retriever results (one partition per retriever) and retrieval metric tables."""

import json

import dagster as dg
import pandas as pd

from rag_eval_assets.configured_run import chunking_part, retriever_params
from rag_eval_assets.corpus.gold import resolve_gold, with_resolved_support_groups
from rag_eval_assets.defs.cluster_resources import encode_op_tags
from rag_eval_assets.defs.code_versions import with_settings_read
from rag_eval_assets.defs.fingerprints import RETRIEVER_CONFIG
from rag_eval_assets.defs.inputs.corpus import chunk_set_ins, chunk_set_key, of_chunk_set
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.defs.metadata import content_version, dataset_versions, preview, version_metadata
from rag_eval_assets.defs.partitions import SUT_GROUP, retriever_partitions, sut_partitions
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.defs.storage.parquet_io_manager import PARTITION_DIMENSIONS_KEY
from rag_eval_assets.evalset.tables import questions_for_metrics, questions_from_frame
from rag_eval_assets.index_env import index_env
from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.retrieval import retrieval_metrics as score_retrieval
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.retrieval.http_sut import sut_chunks_frame
from rag_eval_assets.retrieval.index_families import IndexNeed, from_tables
from rag_eval_assets.retrieval.registry import BuiltIndexes, Variant, kind_of, needs_of, own_answer_variants
from rag_eval_assets.retrieval.retrievers import collapse_to_documents, run_retriever
from rag_eval_assets.retrieval.sut_responses import responses_frame, results_from_responses
from rag_eval_assets.retrieval.sut_url import shown_url
from rag_eval_assets.settings import Settings

# Chunks fetched per query before collapsing to documents, as a multiple of the deepest k (doc level only).
DOC_LEVEL_CHUNK_FACTOR = 5


def _index_asset(need: IndexNeed, op_tags: dict[str, str]) -> dg.AssetsDefinition:
    """The asset of one index need, from its family's hooks: built from the chunks, stored as its table; `op_tags`
    what its step asks of a dask worker (a GPU for an encoder on cuda)."""
    family = need.family
    code_version = "1" if family.reads is None else with_settings_read("1", family.reads(need))

    @dg.asset(key=list(family.asset_key(need)), group_name="index", kinds=set(family.asset_kinds),
              description=family.description, code_version=code_version, deps=[preflight], op_tags=op_tags,
              ins={"chunks": dg.AssetIn(key=chunk_set_key("chunks", need.chunk_set))})
    def index(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, chunks: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        s = settings.load()
        with index_env(s, context.log.info) as env:
            built = family.build(need, chunks, env)
            table = family.to_table(built.index, chunks["chunk_id"])
        chunking = s.chunk_sets[need.chunk_set] if need.chunk_set else s.chunking
        versions = dataset_versions(context, s, evalset=False).with_part("index", **chunking_part(s, chunking),
                                                                         **built.version)
        return dg.Output(table, metadata={**built.metadata, **version_metadata(versions)})

    return index


def _search(
    context: dg.AssetExecutionContext,
    s: Settings,
    variant: Variant,
    questions: pd.DataFrame,
    chunks: pd.DataFrame,
    tables: dict[tuple[str, str], pd.DataFrame],
) -> pd.DataFrame:
    depth = max(s.k_values)
    search_depth = depth * DOC_LEVEL_CHUNK_FACTOR if s.retrieval.level == "doc" else depth
    ids, texts = questions["id"].tolist(), questions["question"].tolist()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            context.log.info(f"{variant.name}: {done}/{total} queries")

    with index_env(s, context.log.info) as env:
        indexes = BuiltIndexes(chunks, s.corpus.language, from_tables(tables, chunks, env))
        retriever = kind_of(variant).build(variant, indexes)
        folders = _question_folders(questions) if s.retrieval.folder_filter else None
        results = run_retriever(variant.name, retriever, ids, texts, chunks, search_depth, progress, folders)
    if s.retrieval.level == "doc":
        results = collapse_to_documents(results, depth)
    return results


def _index_part(s: Settings, variant: Variant) -> dict[str, str]:
    """The indexes a retriever searches, from its settings, as each family describes its need."""
    part: dict[str, str] = {}
    for need in needs_of({variant.name: variant}, s.corpus.language):
        part.update(need.family.version(need))
    return part


def with_chunking(table: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """An aggregated metric table with each row's chunk_size_chars and overlap_chars: its retriever's chunking."""
    chunkings = {name: s.chunking_of(name) for name in s.variants}
    return table.assign(
        chunk_size_chars=table["retriever"].map(lambda r: chunkings[r].chunk_size_chars).astype("int64"),
        overlap_chars=table["retriever"].map(lambda r: chunkings[r].overlap_chars).astype("int64"))


def _question_folders(evalset: pd.DataFrame) -> list[list[str]]:
    return [json.loads(value) for value in evalset["folders"]]


def _sut_url(variant: Variant) -> str:
    return shown_url(variant.params.base_url, variant.params.path)


def retrieval_defs(settings: Settings) -> dg.Definitions:
    retrievers = retriever_partitions(settings)
    needs = needs_of(settings.variants, settings.corpus.language)
    index_assets = [_index_asset(n, encode_op_tags(settings, n.family.device(n)) if n.family.device else {})
                    for n in needs]
    suts = own_answer_variants(settings.variants)
    ins = {n.family.input_name(n): dg.AssetIn(key=dg.AssetKey(list(n.family.asset_key(n)))) for n in needs}
    sut_assets = []
    if suts:
        # Only the services' own partitions read their responses; the others map to none.
        ins["sut_responses"] = dg.AssetIn(partition_mapping=dg.StaticPartitionMapping({n: [n] for n in suts}),
                                          dagster_type=dict[str, pd.DataFrame])

        @dg.asset(
            group_name=SUT_GROUP,
            kinds={"pandas", "parquet"},
            partitions_def=sut_partitions(settings),
            metadata={PARTITION_DIMENSIONS_KEY: ["retriever"]},
            code_version="1",
        )
        def sut_responses(
            context: dg.AssetExecutionContext, settings: RagEvalSettings, evalset: pd.DataFrame
        ) -> dg.Output[pd.DataFrame]:
            """One call per question to the system under test, at the largest k with debug=true (its folders when
            the folder filter is on); its retrieval results and its answers at every k are read from here. Every
            pipeline run calls the service again (it may have changed without our inputs changing); the data version
            is the responses' sha256, so what is derived from them re-runs when they differ."""
            s = settings.load()
            variant = s.variants[context.partition_key]
            folders = _question_folders(evalset) if s.retrieval.folder_filter else None
            outcomes = kind_of(variant).respond(variant, evalset["question"].tolist(), max(s.k_values), folders)
            table = responses_frame(evalset["id"].tolist(), variant.name, outcomes)
            failed = table["error"].notna()
            if failed.any():
                context.log.warning(f"{variant.name}: {int(failed.sum())} of {len(table)} calls failed; first: "
                                    f"{table.loc[failed, 'error'].iloc[0]}")
            versions = dataset_versions(context, s, corpus=False).with_part(
                "retriever", **retriever_params(s, variant.name))
            latency = table["latency_s"].dropna()
            return dg.Output(table, data_version=content_version(table), metadata={
                "retriever": variant.name,
                "calls": len(table),
                "errors": int(failed.sum()),
                "url": redact_url(_sut_url(variant)),
                "latency_p50_ms": float(latency.median() * 1000) if len(latency) else 0.0,
                "preview": preview(table, ["query_id", "latency_s", "attempts", "error"]),
                **version_metadata(versions),
            })

        sut_assets.append(sut_responses)

    @dg.asset(
        group_name="retrieval",
        kinds={"pandas", "parquet"},
        partitions_def=retrievers,
        metadata={PARTITION_DIMENSIONS_KEY: ["retriever"]},
        ins={"evalset": dg.AssetIn(), "chunks": dg.AssetIn(), **chunk_set_ins(settings, "chunks"), **ins},
        code_version="1",
        deps=[RETRIEVER_CONFIG],
    )
    def retrieval_results(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, **inputs: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        """The ranked chunks of every question for one retriever, depth = the largest k, with per-query latency."""
        s = settings.load()
        variant = s.variants[context.partition_key]
        evalset, chunks = inputs["evalset"], of_chunk_set(inputs, "chunks", variant.chunk_set)
        if kind_of(variant).own_answers:
            results = results_from_responses(inputs["sut_responses"][variant.name], _sut_url(variant), variant.name)
        else:
            tables = {(n.name, n.key): inputs[n.family.input_name(n)]
                      for n in needs_of({variant.name: variant}, s.corpus.language)}
            results = _search(context, s, variant, evalset, chunks, tables)
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s, s.chunking_of(variant.name)),
                                                          **_index_part(s, variant))
        versions = versions.with_part("retriever", **retriever_params(s, variant.name))
        latency = results.drop_duplicates("query_id")["latency_s"]
        return dg.Output(
            results,
            metadata={
                "retriever": variant.name,
                "kind": variant.kind,
                "queries": int(results["query_id"].nunique()),
                "latency_p50_ms": float(latency.median() * 1000) if len(latency) else 0.0,
                "latency_p95_ms": float(latency.quantile(0.95) * 1000) if len(latency) else 0.0,
                "preview": preview(results, ["query_id", "rank", "chunk_id", "score"]),
                **version_metadata(versions),
            },
        )

    @dg.asset(
        group_name="retrieval",
        kinds={"pandas", "parquet"},
        ins={"evalset": dg.AssetIn(), "chunks": dg.AssetIn(), "gold_labels": dg.AssetIn(),
             **chunk_set_ins(settings, "chunks", "gold_labels"),
             "retrieval_results": dg.AssetIn(partition_mapping=dg.AllPartitionMapping(),
                                             dagster_type=dict[str, pd.DataFrame])},
        code_version="2",  # 2: a service under test is scored on the questions our corpus labels
    )
    def retrieval_metrics_per_query(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, **inputs: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        """hit, doc_hit, precision, recall, MRR, nDCG, MAP, Recall_any/all and false positives per question; each
        retriever against the gold labels and chunks of its own chunking."""
        s = settings.load()
        evalset, retrieval_results = inputs["evalset"], inputs["retrieval_results"]
        question_list = questions_from_frame(evalset)
        scored: dict[str | None, pd.DataFrame] = {}  # the questions as the gold of each chunk set scores them
        tables = []
        for name in sorted(retrieval_results):  # one partition in memory at a time
            results = retrieval_results[name]
            chunk_set = s.variants[name].chunk_set
            chunks, gold_labels = (of_chunk_set(inputs, asset, chunk_set) for asset in ("chunks", "gold_labels"))
            if chunk_set not in scored:
                # A support that resolved to nothing in the corpus leaves the required groups: scored on what
                # resolved.
                scored[chunk_set] = questions_for_metrics(with_resolved_support_groups(question_list, gold_labels))
            questions = scored[chunk_set]
            # A service under test returns its own chunks: its gold is resolved against what it returned, while it
            # is scored on the questions our corpus labels, so a gold it never returned is a miss, not a question
            # left out (a worse service can only score lower).
            own = kind_of(s.variants[name]).own_answers
            gold = resolve_gold(question_list, sut_chunks_frame(results), strict=False) if own else gold_labels
            scope = None
            if s.retrieval.folder_filter and not own:
                scope = {q: f for q, f in zip(evalset["id"], _question_folders(evalset)) if f}
            tables.append(
                score_retrieval(results, gold, questions, s.k_values, s.retrieval.level, folder_filter=scope,
                                chunks=chunks if scope else None, scored_on=gold_labels, retrievers=[name])
            )
        per_query = pd.concat(tables, ignore_index=True)
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
        return dg.Output(per_query, metadata={"retrievers": sorted(retrieval_results), **version_metadata(versions)})

    @dg.asset(group_name="retrieval", kinds={"pandas", "parquet"}, code_version="1")
    def retrieval_metrics(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        evalset: pd.DataFrame,
        retrieval_metrics_per_query: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        """Means per retriever, k and slice with bootstrap 95% intervals; each retriever's chunk_size / overlap
        beside its rows."""
        s = settings.load()
        questions = questions_for_metrics(questions_from_frame(evalset))
        table = with_chunking(aggregate_metrics(retrieval_metrics_per_query, questions), s)
        overall = table[table["slice"] == "all"].pivot_table(
            index=["retriever", "k"], columns="metric", values="value"
        ).reset_index()
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
        return dg.Output(
            table,
            metadata={
                "chunk_size_chars": s.chunking.chunk_size_chars,
                "overlap_chars": s.chunking.overlap_chars,
                "level": s.retrieval.level,
                "summary": dg.MetadataValue.md(
                    f"chunk_size_chars={s.chunking.chunk_size_chars}, overlap_chars={s.chunking.overlap_chars}\n\n"
                    + overall.round(4).to_markdown(index=False)
                ),
                **version_metadata(versions),
            },
        )

    return dg.Definitions(assets=[*index_assets, *sut_assets, retrieval_results, retrieval_metrics_per_query,
                                  retrieval_metrics])
