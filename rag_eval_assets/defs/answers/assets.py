"""Answers and judgments on the retriever x k grid, and the answer metric tables (generated queries: generated.py)."""

from contextlib import ExitStack

import dagster as dg
import pandas as pd

from rag_eval_assets.defs.answers.build import answerer_for, llm_client, ragas_endpoint, ragas_llm_on
from rag_eval_assets.defs.answers.checks import json_v2_dev_gate
from rag_eval_assets.defs.answers.generated import generated_queries_asset
from rag_eval_assets.defs.inputs.corpus import chunk_set_ins, of_chunk_set
from rag_eval_assets.defs.partitions import answer_grid_partitions
from rag_eval_assets.defs.retrieval.assets import with_chunking
from rag_eval_assets.defs.metadata import dataset_versions, preview, run_versions_of, version_metadata
from rag_eval_assets.defs.resources import LLMResource, RagEvalSettings
from rag_eval_assets.index_env import encoder_for
from rag_eval_assets.defs.storage.parquet_io_manager import PARTITION_DIMENSIONS_KEY
from rag_eval_assets.evalset.tables import questions_from_frame
from rag_eval_assets.generation.answers import answer_questions, prompt_texts
from rag_eval_assets.generation.judges import (
    JUDGES,
    JUDGMENT_COLUMNS,
    judge_agreement,
    judge_answers,
    judges_not_computed,
    judgment_counts,
    why_not_judged,
)
from rag_eval_assets.llm.estimate import NO_CALLS, answering_estimate, judging_estimate
from rag_eval_assets.metrics.answers import grid_aggregate, grid_per_query
from rag_eval_assets.metrics.ragas_context import ragas_grid
from rag_eval_assets.runs.reproducibility import reproducibility_fields
from rag_eval_assets.configured_run import JUDGE_PROMPT_VERSION, chunking_part, judge_part
from rag_eval_assets.retrieval.registry import kind_of, own_answer_variants
from rag_eval_assets.settings import Settings

LLM_POOL = "llm"  # deploy/dagster.yaml limits it to one step at a time across runs


def _grid_key(context: dg.AssetExecutionContext) -> tuple[str, int]:
    keys = context.partition_key.keys_by_dimension
    return keys["retriever"], int(keys["k"])


def answer_defs(settings: Settings) -> dg.Definitions:
    grid = answer_grid_partitions(settings)
    grid_metadata = {PARTITION_DIMENSIONS_KEY: ["retriever", "k"]}
    by_retriever = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="retriever")
    # Only a step that calls an LLM takes a slot of the "llm" pool: extractive answers and runs without an endpoint
    # must not queue behind the one LLM slot.
    query_pool = LLM_POOL if settings.llm_for("query_generation") is not None else None
    ragas_pool = LLM_POOL if ragas_llm_on(settings) else None
    answer_pool = LLM_POOL if settings.answering.answerer == "llm" else None
    judge_pool = LLM_POOL if settings.llm_for("judge") is not None and settings.judge.enabled else None
    # A service under test's answers are read from its stored responses (one call per question per run).
    # Every cell reads them (Dagster maps a grid cell to no partition of a subset): a new call re-runs the grid's
    # answers, our retrievers' from the LLM cache or the extractive answerer, never our retrieval.
    sut_in = {"sut_responses": dg.AssetIn(partition_mapping=dg.AllPartitionMapping(),
                                          dagster_type=dict[str, pd.DataFrame])} \
        if own_answer_variants(settings.variants) else {}

    @dg.asset(
        group_name="answers",
        kinds={"pandas", "parquet"},
        partitions_def=grid,
        metadata=grid_metadata,
        ins={"evalset": dg.AssetIn(), "chunks": dg.AssetIn(), **chunk_set_ins(settings, "chunks"),
             "retrieval_results": dg.AssetIn(partition_mapping=by_retriever), **sut_in},
        pool=answer_pool,
        code_version="1",
    )
    def answers(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, llm: LLMResource, **inputs: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        """Every question answered from one retriever's top-k chunks (extractive, LLM), or the service under test's
        stored answer."""
        s = settings.load()
        retriever, k = _grid_key(context)
        evalset, retrieval_results = inputs["evalset"], inputs["retrieval_results"]
        chunks = of_chunk_set(inputs, "chunks", s.variants[retriever].chunk_set)
        own = kind_of(s.variants[retriever]).own_answers
        answering_llm = s.llm_for("answerer")
        estimate = answering_estimate(prompt_texts(evalset, retrieval_results, chunks, k), answering_llm) \
            if s.answering.answerer == "llm" and answering_llm is not None and not own else dict(NO_CALLS)
        if estimate["calls"]:
            context.log.info(f"estimate before answering: {estimate}")
        sut_table = inputs["sut_responses"][retriever] if own else None
        with answerer_for(s, retriever, llm.key("answerer"), sut_table) as answerer:
            table = answer_questions(answerer, evalset, retrieval_results, chunks, k, retriever)
            version = answerer.version
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s, s.chunking_of(retriever))
                                                          ).with_part("answerer", **version).with_part(
            "retriever", name=retriever, k=k)
        return dg.Output(
            table,
            metadata={
                "answerer": answerer.kind,
                "answers": len(table),
                "errors": int(table["error"].notna().sum()),
                "abstained": int(table["abstained"].sum()),
                "abstained_inferred": int(table["abstained_inferred"].sum()),
                "prompt_tokens": int(table["prompt_tokens"].fillna(0).sum()),
                "completion_tokens": int(table["completion_tokens"].fillna(0).sum()),
                "cost_usd": float(table["cost_usd"].fillna(0).sum()),
                "estimate": dg.MetadataValue.json(estimate),
                "preview": preview(table, ["query_id", "answer", "abstained", "error"]),
                **version_metadata(versions),
            },
        )

    @dg.asset(group_name="answers", kinds={"pandas", "parquet"}, partitions_def=grid, metadata=grid_metadata,
              pool=judge_pool, code_version="1")
    def judged_answers(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        llm: LLMResource,
        evalset: pd.DataFrame,
        answers: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        """Groundedness and correctness (0-5, seed 002) from a pinned judge at temperature 0; failures kept as rows."""
        s = settings.load()
        judge_llm = s.llm_for("judge")
        if (reason := why_not_judged(judge_llm is not None, s.judge.enabled)) is not None:
            versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
            return dg.Output(pd.DataFrame(columns=list(JUDGMENT_COLUMNS)),
                             metadata={"not_computed": reason, **version_metadata(versions)})
        estimate = judging_estimate(answers["answer"], answers["contexts"], len(JUDGES), judge_llm)
        context.log.info(f"estimate before judging: {estimate}")
        with llm_client(s, "judge", llm.key("judge")) as client:
            table = judge_answers(client, answers, evalset, JUDGE_PROMPT_VERSION, s.judge.replicates,
                                  s.judge.replicate_sample)
            usage = client.usage()
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s)).with_part(
            "judge", **judge_part(s))
        metadata = {
            "judge_model": judge_llm.model,
            "judge_prompt_version": JUDGE_PROMPT_VERSION,
            "counts": dg.MetadataValue.json(judgment_counts(table)),
            "usage": dg.MetadataValue.json(usage),
            "estimate": dg.MetadataValue.json(estimate),
            **version_metadata(versions),
        }
        if s.judge.replicates:
            metadata["self_agreement"] = dg.MetadataValue.json(judge_agreement(table))
        return dg.Output(table, metadata=metadata)

    every = dict(partition_mapping=dg.AllPartitionMapping(), dagster_type=dict[str, pd.DataFrame])

    @dg.asset(
        group_name="answers",
        kinds={"pandas", "parquet"},
        ins={
            "evalset": dg.AssetIn(), "chunks": dg.AssetIn(), "gold_labels": dg.AssetIn(),
            **chunk_set_ins(settings, "chunks", "gold_labels"),
            "answers": dg.AssetIn(**every),
            "judged_answers": dg.AssetIn(**every),
            "retrieval_results": dg.AssetIn(**every),
        },
        pool=ragas_pool,  # ragas' LLM context metrics
        code_version="1",
    )
    def answer_metrics_per_query(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, llm: LLMResource, **inputs: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        """Every answer metric of the seeds per question, retriever and k (long: query_id, retriever, k, metric,
        value), each retriever's against the chunks and gold labels of its chunking; LLM-only metrics without an
        endpoint are listed as not computed, never as zero."""
        s = settings.load()
        answers, judged_answers, retrieval_results = (inputs[name] for name in (
            "answers", "judged_answers", "retrieval_results"))

        def chunks_of(retriever: str) -> pd.DataFrame:
            return of_chunk_set(inputs, "chunks", s.variants[retriever].chunk_set)

        def gold_of(retriever: str) -> pd.DataFrame:
            return of_chunk_set(inputs, "gold_labels", s.variants[retriever].chunk_set)

        questions = questions_from_frame(inputs["evalset"])
        # Only seed 004's reference answers need an encoder (semantic similarity): a run without them loads none.
        encoder = encoder_for(s, s.retrieval.dense) if any(
            q.reference_answer for q in questions) else None
        with ExitStack() as stack:
            # Through our client, so its cache makes a re-run with unchanged inputs send nothing.
            client = stack.enter_context(llm_client(s, "ragas", llm.key("ragas"))) if ragas_llm_on(s) else None
            ragas = ragas_grid(questions, answers, retrieval_results, chunks_of, gold_of, client,
                               own_answer_variants(s.variants))
            ragas_usage = client.usage() if client is not None else None
        per_query = grid_per_query(questions, answers, judged_answers, ragas, gold_of, chunks_of, encoder,
                                   s.answering.citation_pattern)
        not_computed = judges_not_computed(s.llm_for("judge") is not None, s.judge.enabled)
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
        return dg.Output(
            per_query,
            metadata={
                "not_computed": dg.MetadataValue.json(dict(not_computed)),
                "ragas_error_rows": int(ragas["error"].notna().sum()),
                "ragas_llm": ragas_endpoint(s),
                **({"ragas_llm_usage": dg.MetadataValue.json(ragas_usage)} if ragas_usage is not None else {}),
                **version_metadata(versions),
            },
        )

    @dg.asset(group_name="answers", kinds={"pandas", "parquet"}, code_version="1")
    def answer_metrics(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        evalset: pd.DataFrame,
        answer_metrics_per_query: pd.DataFrame,
    ) -> dg.Output[pd.DataFrame]:
        """Answer metrics per retriever, k and slice with bootstrap 95% intervals, seed 000's weighted score, and a
        row per metric that was not computed (value NaN, n 0, the reason in `note`)."""
        s = settings.load()
        questions = questions_from_frame(evalset)
        not_computed = judges_not_computed(s.llm_for("judge") is not None, s.judge.enabled)
        table = with_chunking(grid_aggregate(answer_metrics_per_query, questions, not_computed), s)
        overall = table[table["slice"] == "all"].pivot_table(index=["retriever", "k"], columns="metric",
                                                             values="value").reset_index()
        versions = run_versions_of(context, s)
        return dg.Output(
            table,
            metadata={
                "reproducibility": dg.MetadataValue.json(reproducibility_fields(versions, s.answering.adapter_id)),
                "not_computed": dg.MetadataValue.json(dict(not_computed)),
                "summary": dg.MetadataValue.md(
                    f"chunk_size_chars={s.chunking.chunk_size_chars}, overlap_chars={s.chunking.overlap_chars}\n\n"
                    + overall.round(4).to_markdown(index=False)
                ),
                **version_metadata(versions),
            },
        )

    return dg.Definitions(
        assets=[answers, judged_answers, generated_queries_asset(query_pool), answer_metrics_per_query,
                answer_metrics],
        asset_checks=[json_v2_dev_gate],
    )

