"""The run directory (seed 002: results.jsonl, metrics.json, config.json, summary.md) and its HTML report with the
verdict against the baseline; the blocking call_health check. The comparison as a table of its own, with the gate
as blocking asset checks, is comparison.py's."""

import base64
from collections.abc import Iterator
from datetime import datetime, timezone

import dagster as dg
import pandas as pd

from rag_eval_assets.configured_run import pipeline_run_config
from rag_eval_assets.defs.fingerprints import GRADES_FILE
from rag_eval_assets.defs.inputs.corpus import chunk_set_ins, latest_unresolved_gold, of_chunk_set
from rag_eval_assets.defs.metadata import run_versions_of, version_metadata
from rag_eval_assets.defs.report.accept import accept_baseline
from rag_eval_assets.defs.report.comparison import PREVIEW_ROWS, check_failures, run_comparison, verdict_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.defs.storage.parquet_io_manager import pipeline_of_run
from rag_eval_assets.judging.grades import grades_path
from rag_eval_assets.judging.grading import configured_grading
from rag_eval_assets.metrics.call_health import check_call_health, endpoint
from rag_eval_assets.reports.charts import CHARTS_DIR
from rag_eval_assets.reports.html import build_report
from rag_eval_assets.reports.judges import judges_markdown
from rag_eval_assets.reports.markdown import markdown_table
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.reports.ranking import BEST_COLUMNS, best_records, ranking_headline, ranking_markdown
from rag_eval_assets.reports.summary import CALL_HEALTH_HEADERS, call_health_rows, metric_sections
from rag_eval_assets.runs.baseline import baseline_of_run
from rag_eval_assets.runs.contents import JUDGES
from rag_eval_assets.runs.listing import run_of_pipeline
from rag_eval_assets.runs.pipeline_run import grid_contents
from rag_eval_assets.runs.status import new_status
from rag_eval_assets.runs.store import SUMMARY_FILE, TIMESTAMP_FORMAT, Run, read_run
from rag_eval_assets.settings import Settings
from rag_eval_assets.verdict.ranking import KRanking

ALL = dg.AssetIn(partition_mapping=dg.AllPartitionMapping())
KEY_CHART = "hit_bars.png"
CALL_HEALTH_CHECK = "call_health"


def _same_pipeline_run(context: dg.AssetExecutionContext, s: Settings) -> tuple[str, Run | None]:
    """The id of the Dagster run group this run belongs to, and the run directory it already wrote (a re-execution,
    whole or from failure, rewrites that one instead of adding a second)."""
    root = context.run.root_run_id or context.run.run_id
    existing = run_of_pipeline(s.runs_dir, root)
    return root, read_run(existing) if existing is not None else None


def _created(run: Run) -> datetime:
    return datetime.strptime(run.created_at, TIMESTAMP_FORMAT).replace(tzinfo=timezone.utc)


def evaluation_run_asset(settings: Settings) -> dg.AssetsDefinition:
    """evaluation_run, reading the chunks and gold labels of every chunking the variants search."""

    @dg.asset(
        group_name="report",
        kinds={"html", "json"},
        ins={"retrieval_results": ALL, "answers": ALL, "judged_answers": ALL,
             **chunk_set_ins(settings, "chunks", "gold_labels")},
        deps=[GRADES_FILE],  # the person's grades: a new grade makes the run directory again, judging nothing again
        code_version="2",  # 2: results rows carry their question's gold items
        check_specs=[dg.AssetCheckSpec(
            CALL_HEALTH_CHECK, asset="evaluation_run", blocking=True,
            description="No cell's calls to the answerer LLM, the judge, ragas or the service under test failed more "
                        "often than llm.max_error_rate (default 5%).")],
    )
    def evaluation_run(
        context: dg.AssetExecutionContext,
        settings: RagEvalSettings,
        evalset: pd.DataFrame,
        chunks: pd.DataFrame,
        gold_labels: pd.DataFrame,
        retrieval_results: dict[str, pd.DataFrame],
        retrieval_metrics_per_query: pd.DataFrame,
        retrieval_metrics: pd.DataFrame,
        answers: dict[str, pd.DataFrame],
        judged_answers: dict[str, pd.DataFrame],
        answer_metrics_per_query: pd.DataFrame,
        answer_metrics: pd.DataFrame,
        **chunk_sets: pd.DataFrame,
    ) -> Iterator[dg.Output[pd.DataFrame] | dg.AssetCheckResult]:
        """Writes data/runs/<run_id>/ with the comparison against the baseline, and its offline HTML report; the
        verdict, the gate table, the ranking of retrievers and the headline numbers are this asset's metadata."""
        s = settings.load()
        tables = {"chunks": chunks, "gold_labels": gold_labels, **chunk_sets}
        every_chunk = pd.concat([chunks, *(of_chunk_set(tables, "chunks", c) for c in s.chunk_sets)], ignore_index=True)
        contents = grid_contents(evalset, every_chunk, retrieval_results.values(), retrieval_metrics_per_query,
                                 retrieval_metrics, answers.values(), judged_answers.values(), answer_metrics_per_query,
                                 answer_metrics, latest_unresolved_gold(context), grades_path(s.evalset.path), s.judge,
                                 lambda r: of_chunk_set(tables, "gold_labels", s.variants[r].chunk_set),
                                 s.retrieval.level)
        # Known before the directory is written, so that it is written as failed: Dagster fails the step on this
        # blocking check only after the asset has returned, and a directory written as pending would wait for a
        # commit that never comes, with no word of why.
        health_check = call_health_check(s, contents.health)
        versions = run_versions_of(context, s)
        root, existing = _same_pipeline_run(context, s)
        config = pipeline_run_config(s, versions, context.run.run_id, root)
        baseline = baseline_of_run(s.runs_dir, versions.dataset.get("eval_set_version"), existing,
                                   pinned=s.report.baseline_run_id, config_file=str(s.config_file))
        if existing is not None:
            context.log.info(f"re-execution of run group {root}: rewriting its run directory {existing.path}")
        rankings: list[KRanking] = []  # ranked once (write_run), for summary.md, the report and the metadata
        path = write_run(
            s.runs_dir,
            results=contents.rows,
            metrics=contents.metrics,
            config=config,
            description=s.report.description,
            previous=baseline.path,
            baseline_policy=baseline.record(),
            gate=s.report.gate,
            rankings=rankings,
            grading=configured_grading(s.evalset.path, s.judge),
            store_full_text=s.report.store_full_text,
            run_id=existing.run_id if existing else None,
            now=_created(existing) if existing else None,
            replace=existing is not None,
            status=new_status(pipeline_of_run(context.run, context.instance),
                              check_failures("evaluation_run", [health_check])).as_json(),
        )
        run = read_run(path)
        report = build_report(run, gate=s.report.gate, rankings=rankings)
        chart = base64.b64encode((path / CHARTS_DIR / KEY_CHART).read_bytes()).decode()
        verdict = run.comparison["verdict"] if run.comparison else "no baseline"
        context.log.info(f"run written to {path}; verdict: {verdict}; report {report}")
        summary = "\n\n".join(metric_sections(run.aggregate_frame(), "###", max_rows=PREVIEW_ROWS,
                                                where=str(path / SUMMARY_FILE)))
        yield dg.Output(
            pd.DataFrame([{"run_id": path.name, "run_dir": str(path), "report": str(report),
                           "baseline_run_dir": str(baseline.path) if baseline.path else None, "verdict": verdict}]),
            metadata={
                **verdict_metadata(run.comparison),
                "best": best_table(rankings),
                "ranking": dg.MetadataValue.md(ranking_markdown(rankings, run.aggregate_frame())),
                **{name: dg.MetadataValue.float(value) for name, value in ranking_headline(rankings).items()},
                "run_dir": dg.MetadataValue.path(str(path)),
                "report": dg.MetadataValue.path(str(report)),
                "summary": dg.MetadataValue.md(summary),
                "calls": dg.MetadataValue.md(markdown_table(CALL_HEALTH_HEADERS, call_health_rows(
                    contents.health.to_dict("records"))) if len(contents.health) else "_no answer, judge or ragas calls_"),
                **({"judges": dg.MetadataValue.md(judges_markdown(run.metrics[JUDGES], "###"))}
                   if run.metrics.get(JUDGES) else {}),
                "key_chart": dg.MetadataValue.md(f"![hit@k and doc_hit@k per retriever](data:image/png;base64,{chart})"),
                **version_metadata(versions),
            },
        )
        yield health_check

    return evaluation_run


def best_table(rankings: list[KRanking]) -> dg.TableMetadataValue:
    """Per k, the best retriever and the confidence set of the best (reports/ranking.py best_records)."""
    types = {"k": "int", "value": "float", "set_size": "int"}
    return dg.MetadataValue.table(
        records=[dg.TableRecord(record) for record in best_records(rankings)],
        schema=dg.TableSchema(columns=[dg.TableColumn(name, types.get(name, "string")) for name in BEST_COLUMNS]),
    )


def call_health_check(s: Settings, health: pd.DataFrame) -> dg.AssetCheckResult:
    """metrics/call_health.py check_call_health under llm.max_error_rate (the gate's without an llm section)."""
    limit = s.llm.max_error_rate if s.llm is not None else s.report.gate.max_error_rate
    outcome = check_call_health(health, limit, lambda row: endpoint(row, s.variants, s.answering.answerer, s.llm_for))
    return dg.AssetCheckResult(check_name=CALL_HEALTH_CHECK, passed=outcome.passed, description=outcome.description,
                               metadata=outcome.metadata)


def report_defs(settings: Settings) -> dg.Definitions:
    return dg.Definitions(assets=[evaluation_run_asset(settings), run_comparison], jobs=[accept_baseline])
