"""The run directory (seed 002: results.jsonl, metrics.json, config.json, summary.md), its HTML report with the
verdict against the baseline, and the comparison as a table of its own with the gate as blocking asset checks."""

import base64
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval_assets.defs.inputs.corpus import latest_unresolved_gold
from rag_eval_assets.defs.report.accept import accept_baseline
from rag_eval_assets.defs.metadata import run_versions_of, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.defs.storage.parquet_io_manager import pipeline_of_run
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS
from rag_eval_assets.reports.html import CHARTS_DIR, REPORT_FILE, build_report
from rag_eval_assets.reports.markdown import capped_table, markdown_table
from rag_eval_assets.reports.comparison import (
    DELTA_HEADERS,
    GATE_HEADERS,
    delta_rows,
    gate_rows,
    gate_settings_line,
    recorded_verdict,
)
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.reports.summary import CALL_HEALTH_HEADERS, call_health_rows, metric_sections, ranking_markdown
from rag_eval_assets.runs.reproducibility import reproducibility_fields
from rag_eval_assets.alerts import send_once, verdict_alert, webhook_url
from rag_eval_assets.metrics.call_health import call_health
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.runs.baseline import Baseline, choose_baseline, prune_runs
from rag_eval_assets.runs.status import mark_failed, mark_good, new_status
from rag_eval_assets.runs.store import (
    COMPARISON_JSON,
    PIPELINE_RUN_KEY,
    SUMMARY_FILE,
    TIMESTAMP_FORMAT,
    Run,
    metrics_document,
    read_run,
    results_rows,
    run_config,
    run_eval_set_version,
    run_of_pipeline,
)
from rag_eval_assets.verdict.compare import EXIT_CODES, INCOMPATIBLE, VERDICT_SCORE, WORSE
from rag_eval_assets.verdict.ranking import rank_retrievers
from rag_eval_assets.retrieval.registry import kind_of
from rag_eval_assets.retrieval.sut_url import shown_url
from rag_eval_assets.settings import Settings

ALL = dg.AssetIn(partition_mapping=dg.AllPartitionMapping())
# Dagster stores metadata in its event log: previews of a bounded number of rows, each table whole up to there.
PREVIEW_ROWS = 40
KEY_CHART = "hit_bars.png"
CALL_HEALTH_CHECK = "call_health"
NO_BASELINE = "no baseline run yet: nothing to compare; this run becomes the baseline of the next"
COMPARISON_COLUMNS = ("retriever", "k", "metric", "gate", "base", "cand", "delta", "ci_low", "ci_high", "n_pairs",
                      "p_value", "p_adjusted", "significant", "regressions", "result", "reasons")


def _settings_json(s: Settings) -> dict:
    return {"config_file": str(s.config_file), **s.model_dump(mode="json"),
            "variants": {name: v.version() for name, v in s.variants.items()}}


def _same_pipeline_run(context: dg.AssetExecutionContext, s: Settings) -> tuple[str, Run | None]:
    """The id of the Dagster run group this run belongs to, and the run directory it already wrote (a re-execution,
    whole or from failure, rewrites that one instead of adding a second)."""
    root = context.run.root_run_id or context.run.run_id
    existing = run_of_pipeline(s.runs_dir, root)
    return root, read_run(existing) if existing is not None else None


def _failures(asset: str, checks: list[dg.AssetCheckResult]) -> list[str]:
    """The failed checks as `rag-eval` names them: "check evaluation_run:call_health failed: why"."""
    return [f"check {asset}:{c.check_name} failed: {c.description or 'no description'}" for c in checks if not c.passed]


def _created(run: Run) -> datetime:
    return datetime.strptime(run.created_at, TIMESTAMP_FORMAT).replace(tzinfo=timezone.utc)


def _baseline_of(s: Settings, eval_set_version: str | None, existing: Run | None) -> Baseline:
    """The recorded baseline of a run being rewritten, so that its verdict stays what it was; else by the policy."""
    if existing is not None and existing.comparison is not None:
        recorded = existing.comparison.get("baseline") or {}
        path = s.runs_dir / existing.comparison["base_run_id"]
        if path.is_dir():
            return Baseline.recorded(path, recorded)
    return choose_baseline(s.runs_dir, eval_set_version, pinned=s.report.baseline_run_id,
                           config_file=str(s.config_file), before=existing.run_id if existing else None)


def verdict_metadata(comparison: dict | None) -> dict[str, dg.MetadataValue]:
    """The verdict first, then the whole gate table (one row per retriever and k, never cut)."""
    if comparison is None:
        return {"verdict": dg.MetadataValue.text(NO_BASELINE)}
    return {
        "verdict": dg.MetadataValue.text(recorded_verdict(comparison)),
        "verdict_score": dg.MetadataValue.float(VERDICT_SCORE[comparison["verdict"]]),
        "gate": dg.MetadataValue.md(
            gate_settings_line(comparison["gate"]) + "\n\n" + markdown_table(GATE_HEADERS, gate_rows(comparison["cells"]))
        ),
    }


@dg.asset(
    group_name="report",
    kinds={"html", "json"},
    ins={"retrieval_results": ALL, "answers": ALL, "judged_answers": ALL},
    code_version="1",
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
    retrieval_results: dict[str, pd.DataFrame],
    retrieval_metrics_per_query: pd.DataFrame,
    retrieval_metrics: pd.DataFrame,
    answers: dict[str, pd.DataFrame],
    judged_answers: dict[str, pd.DataFrame],
    answer_metrics_per_query: pd.DataFrame,
    answer_metrics: pd.DataFrame,
) -> Iterator[dg.Output[pd.DataFrame] | dg.AssetCheckResult]:
    """Writes data/runs/<run_id>/ with the comparison against the baseline, and its offline HTML report; the
    verdict, the gate table, the ranking of retrievers and the headline numbers are this asset's metadata."""
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
    not_computed = answer_metrics.loc[answer_metrics["note"].notna(), ["retriever", "k", "metric", "note"]].rename(
        columns={"note": "reason"}
    )
    operational = {
        "answer_errors": int(answers_table["error"].notna().sum()),
        "prompt_tokens": int(answers_table["prompt_tokens"].fillna(0).sum()),
        "completion_tokens": int(answers_table["completion_tokens"].fillna(0).sum()),
        "cost_usd": float(answers_table["cost_usd"].fillna(0).sum()),
    }
    health = call_health(answers.values(), judged, answer_metrics_per_query)
    # Known before the directory is written, so that it is written as failed: Dagster fails the step on this
    # blocking check only after the asset has returned, and a directory written as pending would wait for a
    # commit that never comes, with no word of why.
    health_check = call_health_check(s, health)
    versions = run_versions_of(context, s)
    root, existing = _same_pipeline_run(context, s)
    config = run_config(
        versions,
        settings=_settings_json(s),
        evalset_sha256=versions.dataset.get("evalset_sha256"),
        corpus_sha256=versions.dataset.get("corpus_sha256"),
        chunk_size_chars=s.chunking.chunk_size_chars,
        overlap_chars=s.chunking.overlap_chars,
        dagster_run_id=context.run.run_id,
        **{PIPELINE_RUN_KEY: root},
        **reproducibility_fields(versions, s.answering.adapter_id),
    )
    baseline = _baseline_of(s, versions.dataset.get("eval_set_version"), existing)
    if existing is not None:
        context.log.info(f"re-execution of run group {root}: rewriting its run directory {existing.path}")
    path = write_run(
        s.runs_dir,
        results=rows,
        metrics=metrics_document(aggregate, not_computed, operational, health, latest_unresolved_gold(context)),
        config=config,
        description=s.report.description,
        previous=baseline.path,
        baseline_policy=baseline.record(),
        gate=s.report.gate,
        store_full_text=s.report.store_full_text,
        run_id=existing.run_id if existing else None,
        now=_created(existing) if existing else None,
        replace=existing is not None,
        status=new_status(pipeline_of_run(context.run, context.instance),
                          _failures("evaluation_run", [health_check])).as_json(),
    )
    run = read_run(path)
    report = build_report(run, gate=s.report.gate)
    rankings = rank_retrievers(run, s.report.gate)
    chart = base64.b64encode((path / CHARTS_DIR / KEY_CHART).read_bytes()).decode()
    verdict = run.comparison["verdict"] if run.comparison else "no baseline"
    context.log.info(f"run written to {path}; verdict: {verdict}; report {report}")
    headline = {
        f"{r.metric.removesuffix('@k')}@{r.k} {s_.retriever}": dg.MetadataValue.float(s_.value)
        for r in rankings for s_ in r.retrievers
    }
    ranking = ranking_markdown(rankings)
    summary = "\n\n".join(metric_sections(run.aggregate_frame(), "###", max_rows=PREVIEW_ROWS,
                                            where=str(path / SUMMARY_FILE)))
    yield dg.Output(
        pd.DataFrame([{"run_id": path.name, "run_dir": str(path), "report": str(report),
                       "baseline_run_dir": str(baseline.path) if baseline.path else None, "verdict": verdict}]),
        metadata={
            **verdict_metadata(run.comparison),
            "ranking": dg.MetadataValue.md(ranking),
            **headline,
            "run_dir": dg.MetadataValue.path(str(path)),
            "report": dg.MetadataValue.path(str(report)),
            "summary": dg.MetadataValue.md(summary),
            "calls": dg.MetadataValue.md(markdown_table(CALL_HEALTH_HEADERS, call_health_rows(
                health.to_dict("records"))) if len(health) else "_no answer, judge or ragas calls_"),
            "key_chart": dg.MetadataValue.md(f"![hit@k and doc_hit@k per retriever](data:image/png;base64,{chart})"),
            **version_metadata(versions),
        },
    )
    yield health_check


def _endpoint(s: Settings, row) -> tuple[str, str] | None:
    """Who a health row's calls went to and its URL (credentials redacted); None when no call left the process
    (an extractive answerer)."""
    if row.stage == "answer":
        variant = s.variants.get(row.retriever)
        if variant is not None and kind_of(variant).own_answers:
            return "the service under test", shown_url(variant.params.base_url, variant.params.path)
        if s.answering.answerer == "llm" and s.llm is not None:
            return "the answerer LLM", redact_url(s.llm.base_url)
        return None
    who = {"judge": "the judge", "ragas": "the ragas LLM"}[row.stage]
    return (who, redact_url(s.llm.base_url)) if s.llm is not None else None


def call_health_check(s: Settings, health: pd.DataFrame) -> dg.AssetCheckResult:
    """Fails when a cell's calls to the answerer LLM, the judge, ragas or the service under test failed more often
    than llm.max_error_rate; the description names the endpoint (without credentials) and the first error."""
    limit = s.llm.max_error_rate if s.llm is not None else s.report.gate.max_error_rate
    rows = [(row, endpoint) for row in health.itertuples(index=False)
            if (endpoint := _endpoint(s, row)) is not None]
    if not rows:
        return dg.AssetCheckResult(check_name=CALL_HEALTH_CHECK, passed=True,
                                   description="nothing to check: no LLM or service call was made",
                                   metadata={"status": "nothing to check"})
    bad = [(row, endpoint) for row, endpoint in rows if row.error_rate > limit]
    calls = sum(row.calls for row, _ in rows)
    errors = sum(row.errors for row, _ in rows)
    metadata = {"calls": calls, "errors": errors, "max_error_rate": limit}
    if not bad:
        return dg.AssetCheckResult(check_name=CALL_HEALTH_CHECK, passed=True, metadata=metadata,
                                   description=f"{errors} of {calls} calls failed, within {limit:.0%} per cell")
    shown = "; ".join(
        f"{row.retriever}@{row.k} {row.stage} {row.metric}: {row.errors} of {row.calls} calls to {who} at {url} "
        f"failed ({row.error_rate:.0%} > {limit:.0%}); first error: {row.first_error}"
        for row, (who, url) in bad[:3]) + (f"; and {len(bad) - 3} more cells" if len(bad) > 3 else "")
    return dg.AssetCheckResult(check_name=CALL_HEALTH_CHECK, passed=False, description=shown[:2000],
                               metadata={**metadata, "failing_cells": len(bad)})


@dg.asset(
    group_name="report",
    kinds={"pandas", "parquet"},
    code_version="1",
    check_specs=[
        dg.AssetCheckSpec("invariants_match", asset="run_comparison", blocking=True,
                          description="Evalset, corpus and judge are the baseline's (seed 000 / 002 invariants)."),
        dg.AssetCheckSpec("quality_gate", asset="run_comparison", blocking=True,
                          description="No gated cell is significantly worse than the baseline (report.gate)."),
    ],
)
def run_comparison(context: dg.AssetExecutionContext, settings: RagEvalSettings, evaluation_run: pd.DataFrame):
    """The run's comparison with its baseline, one row per (retriever, k, metric) with deltas, intervals and
    p-values; the gate's rows (gate = true) carry the corrected p-value and the cell's result. Sends the verdict's
    alert (alerts.on) and, when the gate passes, prunes old run directories (retention.keep_runs)."""
    s = settings.load()
    current = evaluation_run.iloc[0]
    run_dir = Path(current["run_dir"])
    versions = version_metadata(run_versions_of(context, s))
    comparison_file = run_dir / COMPARISON_JSON
    if not comparison_file.is_file():
        yield dg.Output(pd.DataFrame(columns=list(COMPARISON_COLUMNS)),
                        metadata={**verdict_metadata(None), **versions, **_housekeeping(context, s, run_dir, None)})
        yield from _record_status(context, run_dir, [
            dg.AssetCheckResult(check_name=name, passed=True, description=NO_BASELINE,
                                metadata={"status": "nothing to check", "reason": "no baseline run yet"})
            for name in ("invariants_match", "quality_gate")])
        return
    comparison = json.loads(comparison_file.read_text(encoding="utf-8"))
    table = comparison_frame(comparison)
    checks = _gate_checks(comparison)
    if failures := _failures("run_comparison", checks):
        mark_failed(run_dir, failures)  # before the output, so that no later failure can skip it
    where = f"the run_comparison table and {comparison_file}"
    yield dg.Output(
        table,
        metadata={
            **verdict_metadata(comparison),
            "baseline_run_id": comparison["base_run_id"],
            "exit_code": comparison["exit_code"],
            "regressions": comparison["regressions"],
            "improvements": comparison["improvements"],
            "metric_deltas": dg.MetadataValue.md(
                capped_table(DELTA_HEADERS, delta_rows(comparison["deltas"]), PREVIEW_ROWS, where)
            ),
            **versions,
            **_housekeeping(context, s, run_dir, comparison),
        },
    )
    yield from _record_status(context, run_dir, checks)


def _gate_checks(comparison: dict) -> list[dg.AssetCheckResult]:
    """invariants_match and quality_gate of a comparison.json record."""
    incompatible = "; ".join(comparison["incompatible"])
    verdict = comparison["verdict"]
    failures = "; ".join(c["reasons"] for c in comparison["cells"] if c["result"] == WORSE)
    description = (f"not judged: the runs are incompatible ({incompatible})" if verdict == INCOMPATIBLE
                   else f"worse: {failures}" if verdict == WORSE else f"{verdict} against {comparison['base_run_id']}")
    return [
        dg.AssetCheckResult(check_name="invariants_match", passed=not incompatible, description=incompatible or None),
        dg.AssetCheckResult(check_name="quality_gate", passed=EXIT_CODES[verdict] == 0,
                            description=description[:2000],
                            metadata={"verdict": verdict, "deciding_cells": ", ".join(comparison["deciding_cells"])}),
    ]


def _record_status(context: dg.AssetExecutionContext, run_dir: Path,
                   checks: list[dg.AssetCheckResult]) -> Iterator[dg.AssetCheckResult]:
    """Yield the checks; a run outside any pipeline whose checks all passed is good now (nothing commits later;
    a pipeline's runs become good when it commits: defs/jobs.py commit_pipeline)."""
    yield from checks
    if all(c.passed for c in checks) and pipeline_of_run(context.run, context.instance) is None:
        mark_good([run_dir], None)


def _housekeeping(context: dg.AssetExecutionContext, s: Settings, run_dir: Path, comparison: dict | None) -> dict:
    """The verdict's alert, then retention once the gate has passed; what happened, as metadata."""
    done: dict[str, str] = {}
    verdict = comparison["verdict"] if comparison else None
    if s.alerts is not None and verdict in s.alerts.on:
        url = webhook_url(s.alerts.webhook_url_env)
        if url is None:
            done["alert"] = f"not sent: alerts.webhook_url_env names {s.alerts.webhook_url_env}, which is not set"
            context.log.warning(done["alert"])
        else:
            evalset = str(run_eval_set_version(run_dir))
            done["alert"] = send_once(verdict_alert(comparison, run_dir, run_dir / REPORT_FILE, evalset), url, run_dir)
            context.log.info(f"alert: {done['alert']}")
    keep = s.retention.keep_runs
    if keep is not None and (comparison is None or EXIT_CODES[verdict] == 0):
        baseline = [s.runs_dir / comparison["base_run_id"]] if comparison else []
        removed = prune_runs(s.runs_dir, run_eval_set_version(run_dir), keep, protect=[run_dir, *baseline])
        done["retention"] = f"kept the newest {keep} runs of this evalset; removed {len(removed)}" + (
            f": {', '.join(p.name for p in removed)}" if removed else "")
        context.log.info(done["retention"])
    return done


def comparison_frame(comparison: dict) -> pd.DataFrame:
    """Every metric delta of comparison.json, the gate cells' own rows marked gate = true with their result."""
    cells = {(c["retriever"], c["k"]): c for c in comparison["cells"]}
    rows = []
    for d in comparison["deltas"]:
        cell = cells.get((d["retriever"], d["k"]))
        is_gate = cell is not None and cell["metric"] == d["metric"]
        rows.append({
            **{key: d[key] for key in ("retriever", "k", "metric", "base", "cand", "delta", "ci_low", "ci_high",
                                       "n_pairs", "p_value")},
            "gate": is_gate,
            "p_adjusted": cell["p_adjusted"] if is_gate else None,
            "significant": bool(cell["significant"]) if is_gate else None,
            "regressions": cell["regressions"] if is_gate else None,
            "result": cell["result"] if is_gate else None,
            "reasons": cell["reasons"] if is_gate else None,
        })
    table = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    return table.astype({"k": "int64", "base": "float64", "cand": "float64", "delta": "float64",
                         "ci_low": "float64", "ci_high": "float64", "p_value": "float64", "p_adjusted": "float64",
                         "regressions": "Int64", "significant": "boolean", "gate": "bool"})


def report_defs() -> dg.Definitions:
    return dg.Definitions(assets=[evaluation_run, run_comparison], jobs=[accept_baseline])
