"""The run directory (seed 002: results.jsonl, metrics.json, config.json, summary.md), its HTML report, and the
comparison against a baseline with the gate as blocking asset checks."""

import base64
import dataclasses
import json
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval_assets.defs.answers.assets import JUDGE_PROMPT_VERSION
from rag_eval_assets.defs.metadata import upstream_versions, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS
from rag_eval_assets.reports.html import CHARTS_DIR, build_report
from rag_eval_assets.runs.compare import compare_runs, comparison_markdown
from rag_eval_assets.runs.store import (
    SUMMARY_FILE,
    latest_run,
    metrics_document,
    read_run,
    results_rows,
    run_config,
    write_run,
)
from rag_eval_assets.runs.reproducibility import reproducibility_fields
from rag_eval_assets.runs.versions import VersionTuple
from rag_eval_assets.settings import Settings

ALL = dg.AssetIn(partition_mapping=dg.AllPartitionMapping())
# Dagster stores metadata in its event log: a summary and one small chart, not the whole report.
SUMMARY_CHARS = 8000
KEY_CHART = "hit_bars.png"


def _settings_json(s: Settings) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(s), default=str))


def _run_versions(context: dg.AssetExecutionContext, s: Settings) -> VersionTuple:
    versions = upstream_versions(context, "evalset", "chunks", "bm25_index", "dense_index")
    r = s.retrieval
    versions = versions.with_part(
        "retriever",
        retrievers=list(s.retrievers),
        k_values=list(s.k_values),
        level=r.level,
        bm25=dataclasses.asdict(r.bm25),
        hybrid=dataclasses.asdict(r.hybrid),
        folder_filter=r.folder_filter,
    )
    answerer = upstream_versions(context, "answers").answerer
    versions = versions.with_part("answerer", **answerer, k_values=list(s.answering.k_values))
    if s.llm is not None and s.judge.enabled:
        versions = versions.with_part(
            "judge", model=s.llm.model, prompt_version=JUDGE_PROMPT_VERSION, temperature=s.llm.temperature
        )
    return versions


@dg.asset(
    group_name="report",
    kinds={"html", "json"},
    ins={"retrieval_results": ALL, "answers": ALL, "judged_answers": ALL},
)
def evaluation_run(
    context: dg.AssetExecutionContext,
    settings: RagEvalSettings,
    evalset: pd.DataFrame,
    chunks: pd.DataFrame,
    retrieval_results: dict[str, pd.DataFrame],
    retrieval_metrics_per_query: pd.DataFrame,
    retrieval_metrics: pd.DataFrame,
    answers: dict[str, pd.DataFrame],
    judged_answers: dict[str, pd.DataFrame],
    answer_metrics_per_query: pd.DataFrame,
    answer_metrics: pd.DataFrame,
) -> dg.Output[pd.DataFrame]:
    """Writes data/runs/<run_id>/ and its offline HTML report with charts; the summary is this asset's metadata."""
    s = settings.load()
    judged = [t for t in judged_answers.values() if len(t)]
    answers_table = pd.concat(answers.values(), ignore_index=True)
    rows = results_rows(
        evalset,
        pd.concat(retrieval_results.values(), ignore_index=True),
        chunks,
        pd.concat([retrieval_metrics_per_query, answer_metrics_per_query], ignore_index=True),
        answers_table,
        pd.concat(judged, ignore_index=True) if judged else None,
    )
    aggregate = pd.concat(
        [retrieval_metrics[list(AGGREGATE_COLUMNS)], answer_metrics.loc[answer_metrics["note"].isna(),
                                                                          list(AGGREGATE_COLUMNS)]],
        ignore_index=True,
    )
    not_computed = answer_metrics.loc[answer_metrics["note"].notna(), ["metric", "note"]].rename(
        columns={"note": "reason"}
    )
    operational = {
        "answer_errors": int(answers_table["error"].notna().sum()),
        "prompt_tokens": int(answers_table["prompt_tokens"].fillna(0).sum()),
        "completion_tokens": int(answers_table["completion_tokens"].fillna(0).sum()),
        "cost_usd": float(answers_table["cost_usd"].fillna(0).sum()),
    }
    versions = _run_versions(context, s)
    config = run_config(
        versions,
        settings=_settings_json(s),
        evalset_sha256=versions.dataset.get("evalset_sha256"),
        corpus_sha256=versions.dataset.get("corpus_sha256"),
        chunk_size_chars=s.chunking.chunk_size_chars,
        overlap_chars=s.chunking.overlap_chars,
        dagster_run_id=context.run.run_id,
        **reproducibility_fields(versions, s.answering.adapter_id),
    )
    previous = latest_run(s.runs_dir)
    path = write_run(
        s.runs_dir,
        results=rows,
        metrics=metrics_document(aggregate, not_computed, operational),
        config=config,
        description=s.report.description,
        previous=previous,
        store_full_text=s.report.store_full_text,
    )
    report = build_report(read_run(path))
    summary = (path / SUMMARY_FILE).read_text(encoding="utf-8")
    chart = base64.b64encode((path / CHARTS_DIR / KEY_CHART).read_bytes()).decode()
    context.log.info(f"run written to {path}; report {report}")
    return dg.Output(
        pd.DataFrame([{"run_id": path.name, "run_dir": str(path), "report": str(report),
                       "previous_run_dir": str(previous) if previous else None}]),
        metadata={
            "run_dir": dg.MetadataValue.path(str(path)),
            "report": dg.MetadataValue.path(str(report)),
            "summary": dg.MetadataValue.md(summary[:SUMMARY_CHARS]),
            "key_chart": dg.MetadataValue.md(f"![hit@k and doc_hit@k per retriever](data:image/png;base64,{chart})"),
            **version_metadata(versions),
        },
    )


@dg.asset(
    group_name="report",
    kinds={"json"},
    check_specs=[
        dg.AssetCheckSpec("invariants_match", asset="run_comparison", blocking=True,
                          description="Evalset, corpus and judge are the baseline's (seed 000 / 002 invariants)."),
        dg.AssetCheckSpec("quality_gate", asset="run_comparison", blocking=True,
                          description="Score delta >= min_delta and regressions <= max_regressions (seed 000)."),
    ],
)
def run_comparison(context: dg.AssetExecutionContext, settings: RagEvalSettings, evaluation_run: pd.DataFrame):
    """This run against the baseline (report.baseline_run_id, else the previous run): deltas with paired p-values,
    configuration changes, top regressions and improvements."""
    s = settings.load()
    current = evaluation_run.iloc[0]
    baseline = s.runs_dir / s.report.baseline_run_id if s.report.baseline_run_id else current["previous_run_dir"]
    if not baseline:
        yield dg.Output(pd.DataFrame(), metadata={"comparison": dg.MetadataValue.md("_no baseline run yet_"),
                                                  **version_metadata(upstream_versions(context, "evaluation_run"))})
        for name in ("invariants_match", "quality_gate"):
            yield dg.AssetCheckResult(check_name=name, passed=True, description="no baseline run yet")
        return
    comparison = compare_runs(
        read_run(baseline),
        read_run(current["run_dir"]),
        min_delta=s.report.min_delta,
        max_regressions=s.report.max_regressions,
        primary_metric=s.report.primary_metric,
    )
    deltas = pd.DataFrame([dataclasses.asdict(d) for d in comparison.deltas])
    markdown = comparison_markdown(comparison)
    (Path(current["run_dir"]) / "comparison.md").write_text(markdown, encoding="utf-8")
    yield dg.Output(
        deltas,
        metadata={
            "baseline": str(baseline),
            "exit_code": comparison.exit_code,
            "regressions": len(comparison.regressions),
            "improvements": len(comparison.improvements),
            "comparison": dg.MetadataValue.md(markdown[:SUMMARY_CHARS]),
            **version_metadata(upstream_versions(context, "evaluation_run")),
        },
    )
    yield dg.AssetCheckResult(
        check_name="invariants_match",
        passed=not comparison.incompatible,
        description="; ".join(comparison.incompatible) or None,
    )
    yield dg.AssetCheckResult(
        check_name="quality_gate",
        passed=not comparison.failures,
        description="; ".join(comparison.failures)[:2000] or None,
    )


def report_defs() -> dg.Definitions:
    return dg.Definitions(assets=[evaluation_run, run_comparison])
