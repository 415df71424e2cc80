"""Answers and judgments on the retriever x k grid, generated queries, and answer metric tables."""

import json
from contextlib import ExitStack

import dagster as dg
import pandas as pd

from rag_eval_assets.defs.answers.build import NO_LLM, answerer_for, llm_client
from rag_eval_assets.defs.answers.checks import json_v2_dev_gate
from rag_eval_assets.defs.partitions import answer_grid_partitions
from rag_eval_assets.defs.metadata import dataset_versions, preview, run_versions_of, version_metadata
from rag_eval_assets.defs.resources import LLMResource, RagEvalSettings
from rag_eval_assets.retrieval.index_env import encoder_for
from rag_eval_assets.defs.storage.parquet_io_manager import PARTITION_DIMENSIONS_KEY
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_from_frame, questions_for_metrics
from rag_eval_assets.generation.abstention import attribution_hit
from rag_eval_assets.generation.answers import answer_questions
from rag_eval_assets.generation.citations import contexts_by_query
from rag_eval_assets.generation.judges import JUDGES, JUDGMENT_COLUMNS, judge_agreement, judge_answers, judgment_counts
from rag_eval_assets.generation.query_generation import generate_queries, sample_chunks, write_generated_evalset
from rag_eval_assets.llm.estimate import estimate_cost, estimate_tokens
from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.answers import answers_from_frame, score_answers
from rag_eval_assets.metrics.call_health import not_computed_note, was_a_call
from rag_eval_assets.metrics.ragas_context import context_rows, ragas_context_metrics
from rag_eval_assets.metrics.rule_score import has_rules, weighted_score
from rag_eval_assets.verdict.gate import WEIGHTED_SCORE
from rag_eval_assets.runs.reproducibility import reproducibility_fields
from rag_eval_assets.runs.versions import JUDGE_PROMPT_VERSION, chunking_part, judge_part
from rag_eval_assets.retrieval.registry import kind_of, own_answer_variants
from rag_eval_assets.settings import Settings

LLM_POOL = "llm"  # deploy/dagster.yaml limits it to one step at a time across runs
NO_RULES = ("not applicable: no question has a seed 000 rule (must_include, must_include_any, must_not_include, "
            "require_citation)")
NOT_COMPUTED_COLUMNS = ("metric", "reason")
# `error`: the failed call's error text of a judge or ragas row (value NaN), so that an outage is counted and shown.
PER_QUERY_COLUMNS = ("query_id", "retriever", "k", "metric", "value", "error")


def _ragas_table(
    s: Settings,
    api_key: str | None,
    questions: list[Question],
    answers: dict[str, pd.DataFrame],
    retrieval_results: dict[str, pd.DataFrame],
    chunks: pd.DataFrame,
    gold_labels: pd.DataFrame,
) -> tuple[pd.DataFrame, dict[str, float] | None]:
    """ragas' context metrics per question, retriever and k with each row's error text, and the usage of the LLM
    client they asked through (None without an llm section: the non-LLM variants ran)."""
    tables = []
    with ExitStack() as stack:
        # Through our client, so its cache makes a re-run with unchanged inputs send nothing.
        client = stack.enter_context(llm_client(s, api_key)) if s.llm is not None else None
        for key in sorted(answers):
            retriever, k = str(answers[key]["retriever"].iloc[0]), int(answers[key]["k"].iloc[0])
            # A service under test returns its own chunks, not ours: ragas gets no chunk texts to compare there.
            if not kind_of(s.variants[retriever]).own_answers:
                rows = context_rows(questions, retrieval_results[retriever], chunks, gold_labels, k)
                tables.append(ragas_context_metrics(rows, client).assign(retriever=retriever, k=k))
        usage = client.usage() if client is not None else None
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=list(PER_QUERY_COLUMNS))
    return table[list(PER_QUERY_COLUMNS)], usage


def _grid_key(context: dg.AssetExecutionContext) -> tuple[str, int]:
    keys = context.partition_key.keys_by_dimension
    return keys["retriever"], int(keys["k"])


def answer_defs(settings: Settings) -> dg.Definitions:
    grid = answer_grid_partitions(settings)
    grid_metadata = {PARTITION_DIMENSIONS_KEY: ["retriever", "k"]}
    by_retriever = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="retriever")
    # Only a step that calls an LLM takes a slot of the "llm" pool: extractive answers and runs without an endpoint
    # must not queue behind the one LLM slot.
    llm_pool = LLM_POOL if settings.llm is not None else None
    answer_pool = LLM_POOL if settings.answering.answerer == "llm" else None
    judge_pool = LLM_POOL if settings.llm is not None and settings.judge.enabled else None
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
        ins={"evalset": dg.AssetIn(), "chunks": dg.AssetIn(),
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
        evalset, chunks, retrieval_results = inputs["evalset"], inputs["chunks"], inputs["retrieval_results"]
        own = kind_of(s.variants[retriever]).own_answers
        estimate = _estimate(s, evalset, retrieval_results, chunks, k, own)
        if estimate["calls"]:
            context.log.info(f"estimate before answering: {estimate}")
        sut_table = inputs["sut_responses"][retriever] if own else None
        with answerer_for(s, retriever, llm.api_key, sut_table) as answerer:
            table = answer_questions(answerer, evalset, retrieval_results, chunks, k, retriever)
            version = answerer.version
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s)).with_part(
            "answerer", **version).with_part("retriever", name=retriever, k=k)
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
        if s.llm is None or not s.judge.enabled:
            reason = NO_LLM if s.llm is None else "not computed: judge.enabled is false"
            versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
            return dg.Output(pd.DataFrame(columns=list(JUDGMENT_COLUMNS)),
                             metadata={"not_computed": reason, **version_metadata(versions)})
        estimate = estimate_cost(len(answers) * len(JUDGES), _mean_prompt_tokens(answers), 200, s.llm)
        context.log.info(f"estimate before judging: {estimate}")
        with llm_client(s, llm.api_key) as client:
            table = judge_answers(client, answers, evalset, JUDGE_PROMPT_VERSION, s.judge.replicates,
                                  s.judge.replicate_sample)
            usage = client.usage()
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s)).with_part(
            "judge", **judge_part(s))
        metadata = {
            "judge_model": s.llm.model,
            "judge_prompt_version": JUDGE_PROMPT_VERSION,
            "counts": dg.MetadataValue.json(judgment_counts(table)),
            "usage": dg.MetadataValue.json(usage),
            "estimate": dg.MetadataValue.json(estimate),
            **version_metadata(versions),
        }
        if s.judge.replicates:
            metadata["self_agreement"] = dg.MetadataValue.json(judge_agreement(table))
        return dg.Output(table, metadata=metadata)

    @dg.asset(group_name="answers", kinds={"pandas", "parquet"}, pool=llm_pool, code_version="1")
    def generated_queries(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, llm: LLMResource, chunks: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        """Seed 004 questions generated from sampled chunks, written as an evalset file that can be frozen."""
        s = settings.load()
        versions = dataset_versions(context, s, evalset=False).with_part("index", **chunking_part(s))
        if s.llm is None:
            return dg.Output(pd.DataFrame(columns=["id", "question", "type"]),
                             metadata={"not_computed": NO_LLM, **version_metadata(versions)})
        sample = sample_chunks(chunks, s.query_generation.n_chunks, s.query_generation.seed)
        with llm_client(s, llm.api_key) as client:
            questions, report = generate_queries(client, sample)
            usage = client.usage()
        path = s.generated_dir / "generated_queries.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_generated_evalset(questions, path)
        table = pd.DataFrame(
            {"id": [q.id for q in questions], "question": [q.question for q in questions],
             "type": [q.type for q in questions], "gold_chunk_ids": [json.dumps(q.gold_chunk_ids) for q in questions]}
        )
        return dg.Output(
            table,
            metadata={
                "evalset_file": dg.MetadataValue.path(str(path)),
                "report": dg.MetadataValue.json({k: v for k, v in report.items() if k != "calls"}),
                "usage": dg.MetadataValue.json(usage),
                "preview": preview(table, ["id", "type", "question"]),
                **version_metadata(versions.with_part("answerer", model=s.llm.model, prompt="query_generation")),
            },
        )

    @dg.asset(
        group_name="answers",
        kinds={"pandas", "parquet"},
        ins={
            "answers": dg.AssetIn(partition_mapping=dg.AllPartitionMapping()),
            "judged_answers": dg.AssetIn(partition_mapping=dg.AllPartitionMapping()),
            "retrieval_results": dg.AssetIn(partition_mapping=dg.AllPartitionMapping()),
        },
        pool=llm_pool,  # ragas' LLM context metrics
        code_version="1",
    )
    def answer_metrics_per_query(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        llm: LLMResource,
        evalset: pd.DataFrame,
        chunks: pd.DataFrame,
        gold_labels: pd.DataFrame,
        answers: dict[str, pd.DataFrame],
        judged_answers: dict[str, pd.DataFrame],
        retrieval_results: dict[str, pd.DataFrame],
    ) -> dg.Output[pd.DataFrame]:
        """Every answer metric of the seeds per question, retriever and k (long: query_id, retriever, k, metric,
        value); LLM-only metrics without an endpoint are listed as not computed, never as zero."""
        s = settings.load()
        questions = questions_from_frame(evalset)
        # Only seed 004's reference answers need an encoder (semantic similarity): a run without them loads none.
        encoder = encoder_for(s, s.retrieval.dense) if any(
            q.reference_answer for q in questions) else None
        tables = []
        for key in sorted(answers):  # one partition in memory at a time
            table = answers[key]
            retriever, k = str(table["retriever"].iloc[0]), int(table["k"].iloc[0])
            per_question, _ = score_answers(questions, answers_from_frame(table), encoder, s.answering.citation_pattern)
            tables.append(per_question.assign(retriever=retriever, k=k))
            tables.append(attribution_hit(table, gold_labels, chunks))
            judged = judged_answers.get(key)
            if judged is not None and len(judged):
                main = judged[judged["replicate"] == 0]
                tables.append(main.rename(columns={"judge": "metric", "score": "value"})[list(PER_QUERY_COLUMNS)])
        ragas, ragas_usage = _ragas_table(s, llm.api_key, questions, answers, retrieval_results, chunks, gold_labels)
        ragas_errors = int(ragas["error"].notna().sum())
        # `error`: why a judge or ragas value is NaN (the failed call's text); null on every other row.
        per_query = pd.concat([*tables, ragas] if len(ragas) else tables, ignore_index=True).reindex(
            columns=list(PER_QUERY_COLUMNS))
        per_query["error"] = per_query["error"].astype(object).where(per_query["error"].notna(), None)
        not_computed = _not_computed(s)
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
        return dg.Output(
            per_query.astype({"k": "int64", "value": "float64", "error": "object"}),
            metadata={
                "not_computed": dg.MetadataValue.json(dict(not_computed)),
                "ragas_error_rows": ragas_errors,
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
        table = aggregate_metrics(answer_metrics_per_query, questions_for_metrics(questions))
        table["note"] = None
        weights = {q.id: q.weight for q in questions}
        scores = answer_metrics_per_query[answer_metrics_per_query["metric"] == "question_score"]
        weighted = [
            (r, k, "all", WEIGHTED_SCORE, weighted_score(g["value"].tolist(), [weights[q] for q in g["query_id"]]),
             float("nan"), float("nan"), len(g), None)
            for (r, k), g in scores.groupby(["retriever", "k"])
        ]
        grid = list(table[["retriever", "k"]].drop_duplicates().itertuples(index=False))
        not_applicable = [] if any(has_rules(q) for q in questions) else [(WEIGHTED_SCORE, NO_RULES)]
        missing = [(r, k, "all", m, float("nan"), float("nan"), float("nan"), 0, reason)
                   for r, k in grid for m, reason in _not_computed(s) + not_applicable]
        # A metric whose every call failed has no value: it says why instead of disappearing.
        for (r, k, m), cell in answer_metrics_per_query.groupby(["retriever", "k", "metric"], sort=True):
            if cell["error"].isna().all() or cell["value"].notna().any():
                continue
            calls = cell[cell["error"].map(was_a_call)]
            failed = calls[calls["error"].notna()]
            note = not_computed_note({"errors": len(failed), "calls": len(calls),
                                      "first_error": str(failed["error"].iloc[0]).splitlines()[0][:300]}) \
                if len(failed) else f"not computed: no row was sent ({', '.join(sorted(set(cell['error'].dropna())))})"
            missing.append((r, k, "all", m, float("nan"), float("nan"), float("nan"), 0, note))
        table = pd.concat([table, pd.DataFrame(weighted + missing, columns=table.columns)], ignore_index=True)
        table["chunk_size_chars"] = s.chunking.chunk_size_chars
        table["overlap_chars"] = s.chunking.overlap_chars
        overall = table[table["slice"] == "all"].pivot_table(index=["retriever", "k"], columns="metric",
                                                             values="value").reset_index()
        versions = run_versions_of(context, s)
        return dg.Output(
            table,
            metadata={
                "reproducibility": dg.MetadataValue.json(reproducibility_fields(versions, s.answering.adapter_id)),
                "not_computed": dg.MetadataValue.json(dict(_not_computed(s))),
                "summary": dg.MetadataValue.md(
                    f"chunk_size_chars={s.chunking.chunk_size_chars}, overlap_chars={s.chunking.overlap_chars}\n\n"
                    + overall.round(4).to_markdown(index=False)
                ),
                **version_metadata(versions),
            },
        )

    return dg.Definitions(
        assets=[answers, judged_answers, generated_queries, answer_metrics_per_query, answer_metrics],
        asset_checks=[json_v2_dev_gate],
    )


def _not_computed(s: Settings) -> list[tuple[str, str]]:
    if s.llm is None:
        return [(m, NO_LLM) for m in JUDGES]
    if not s.judge.enabled:
        return [(m, "not computed: judge.enabled is false") for m in JUDGES]
    return []


def _mean_prompt_tokens(answers: pd.DataFrame) -> float:
    texts = [a + c for a, c in zip(answers["answer"], answers["contexts"])]
    return sum(estimate_tokens(t) for t in texts) / max(len(texts), 1) + 200


def _estimate(s: Settings, evalset: pd.DataFrame, results: pd.DataFrame, chunks: pd.DataFrame, k: int,
              own_answers: bool) -> dict:
    """Calls, tokens and cost an LLM answerer will spend on this partition (zero for the others)."""
    if s.answering.answerer != "llm" or s.llm is None or own_answers:
        return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    contexts = contexts_by_query(results, chunks, k)
    prompt = [estimate_tokens(q) + sum(estimate_tokens(c.text) for c in contexts.get(i, [])) + 200
              for i, q in zip(evalset["id"], evalset["question"])]
    return estimate_cost(len(prompt), sum(prompt) / max(len(prompt), 1), s.llm.max_tokens, s.llm)
