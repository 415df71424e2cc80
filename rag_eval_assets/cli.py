"""`rag-eval`: run the pipeline and evaluate collections from a terminal or a CI job."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from rag_eval_assets.credentials import CredentialError
from rag_eval_assets.errors import InputError
from rag_eval_assets.labeling.grade_command import DISAGREEMENTS, add_grade_arguments
from rag_eval_assets.redaction import install_log_redaction, redact_text
from rag_eval_assets.verdict.settings import CORRECTIONS

INPUT_ERROR = 2  # exit code of a bad input file or setting (named by file, line and field, or by dotted key)
# The instance settings rag-eval writes into a Dagster home that has no dagster.yaml (as `make` does).
INSTANCE_SETTINGS = Path(__file__).resolve().parents[1] / "deploy" / "dagster.yaml"


def _execute(defs, settings, instance, log, force: bool) -> tuple[str | None, list[str], bool]:
    """Materialize what is missing or stale through the jobs (everything with `force`); then print one line per
    asset (and partition): materialized with its row count, up to date, or (after a failure) why it still needs a
    run. Returns the Dagster run that failed (None when every run succeeded), why it failed, and whether an input
    error (a file, line and field) was why."""
    from rag_eval_assets.defs.jobs import pipeline_stages, run_pipeline
    from rag_eval_assets.defs.run_guard import own_tags, recover_dead_runs, watching
    from rag_eval_assets.defs.staleness import Planner

    errors: list[str] = []
    failed_run = None
    input_error = False
    with log:  # everything the runs log, from here on, goes to the log file
        for line in recover_dead_runs(instance):
            print(f"rag-eval: recovered {line}")

        def say(line: str) -> None:
            # Said while a run executes: on the terminal's own descriptor (run_log.py says why).
            print(f"rag-eval: {line}", file=log.stdout, flush=True)

        def around(run_id: str):
            log.listen(instance, run_id)
            return watching(instance, run_id, say)

        materialized: dict[tuple, str] = {}
        for step in run_pipeline(defs, settings, instance, tags=own_tags(), around=around, force=force):
            label = step.job + (f" [{step.partition}]" if step.partition else "")
            print(f"{label}: {'succeeded' if step.result.success else 'FAILED'} (run {step.result.run_id})")
            for event in step.result.get_asset_materialization_events():
                mat = event.materialization
                rows = mat.metadata.get("dagster/row_count")
                materialized[(mat.asset_key, mat.partition)] = "materialized" + (f", {rows.value} rows" if rows else "")
            failed_checks = []
            for check in step.result.get_asset_check_evaluations():
                name = f"{check.asset_key.to_user_string()}:{check.check_name}"
                print(f"  check {name} {'passed' if check.passed else 'FAILED'}")
                if not check.passed:
                    failed_checks.append(f"check {name} failed: {redact_text(check.description or 'no description')}")
            if not step.result.success:
                failed_run = step.result.run_id
                # A failed blocking check says why in its own description; Dagster's error only names it.
                errors += failed_checks
                for event in step.result.all_events:
                    if event.is_step_failure and event.step_failure_data is not None:
                        # Dagster wraps the error our code raised: that one says why (and names the file or setting);
                        # what it was raised from is the library's view, kept in the log.
                        chain = [event.step_failure_data.error]
                        while chain[-1].cause is not None:
                            chain.append(chain[-1].cause)
                        error = next((e for e in chain if not e.cls_name.startswith("Dagster")), chain[-1])
                        input_error |= error.cls_name in (InputError.__name__, CredentialError.__name__)
                        if error.cls_name != "DagsterAssetCheckFailedError" or not failed_checks:
                            errors.append(f"{event.step_key}: {redact_text(error.message.strip())}")
        planner = Planner(defs.resolve_asset_graph(), settings, instance)
        for key, partition, why in planner.listing(pipeline_stages(settings)):
            state = materialized.get((key, partition)) or (f"not run: {why}" if why else "up to date")
            print(f"  {key.to_user_string() + (f'[{partition}]' if partition else ''):<44} {state}")
    return failed_run, errors, input_error


def _dagster_home(config_file: Path) -> None:
    """DAGSTER_HOME, or where it is unset (outside make) the .dagster_home beside the configuration file, as make
    sets it beside the configuration it runs; either way created if missing, with the project's instance settings
    when it has no dagster.yaml of its own."""
    given = os.environ.get("DAGSTER_HOME")
    home = Path(given) if given else config_file.parent / ".dagster_home"
    if not given:
        os.environ["DAGSTER_HOME"] = str(home)  # for Dagster and the processes we start (backfill)
        print(f"rag-eval: DAGSTER_HOME is not set: using {home}", file=sys.stderr)
    if _with_instance_settings(home) and given:
        print(f"rag-eval: {home} had no dagster.yaml: wrote the project's instance settings ({INSTANCE_SETTINGS})",
              file=sys.stderr)


def _with_instance_settings(home: Path) -> bool:
    """Give Dagster home `home` the project's instance settings (telemetry and the UI's community dialog off, the
    run queue, the llm pool, run monitoring) unless it has a dagster.yaml of its own; whether they were written.
    Without one Dagster would use its own defaults: a telemetry banner and dialogs in the UI."""
    home.mkdir(parents=True, exist_ok=True)
    if (home / "dagster.yaml").is_file():
        return False
    shutil.copyfile(INSTANCE_SETTINGS, home / "dagster.yaml")
    return True


@contextmanager
def _pipeline_instance(config_file: Path, instance_dir: Path | None):
    """The instance runs go to: DAGSTER_HOME's, or one of its own in `instance_dir` (evaluate's and benchmark's
    output folder), with the project's instance settings, so that a re-run into the same folder runs only what is
    missing or stale."""
    import dagster as dg

    if instance_dir is None:
        _dagster_home(config_file)
        with dg.DagsterInstance.get() as instance:
            yield instance
        return
    _with_instance_settings(instance_dir)
    with dg.DagsterInstance.from_config(str(instance_dir)) as instance:
        yield instance


FAILURE_LINE = 200  # characters of the reason on the line that says a run failed; all of it is on stderr


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    input_error: bool
    run_dir: Path | None  # the run directory this pipeline wrote, if it got that far
    log_file: Path
    errors: tuple[str, ...] = ()  # why it failed: the failed checks (name and description) and step errors

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else INPUT_ERROR if self.input_error else 1

    def failure_line(self) -> str:
        """What a failed pipeline says first: that it failed, and why: the first reason (a check's name and
        description, or a step's error), cut after its first parts past FAILURE_LINE characters; every reason is
        whole on stderr above."""
        if not self.errors:
            return f"run failed (exit {self.exit_code}): see the log {self.log_file}"
        parts = self.errors[0].split("; ")
        shown = parts[0]
        for part in parts[1:]:
            if len(shown) >= FAILURE_LINE:
                shown += "; …"
                break
            shown += f"; {part}"
        more = f" (and {len(self.errors) - 1} more reasons above)" if len(self.errors) > 1 else ""
        return f"run failed (exit {self.exit_code}): {shown}{more}"

    def where(self) -> str:
        """Where to look: the run directory and its report when written, and the log."""
        from rag_eval_assets.reports.html import REPORT_FILE

        lines = [f"run directory: {self.run_dir}", f"report: {self.run_dir / REPORT_FILE}"] if self.run_dir else []
        return "\n".join([*lines, f"log: {self.log_file}"])


def _pipeline(defs, settings, instance, verbose: bool, force: bool = False) -> _Outcome:
    """The jobs of the pipeline, for what is missing or stale (everything with `force`), their log in a file (and on
    the terminal with `verbose`); why a run failed on stderr, one line per reason, never a stack trace. With
    nothing to do, the run directory is the current one's."""
    from rag_eval_assets.defs.run_log import RunLog
    from rag_eval_assets.runs.store import list_runs

    before = set(list_runs(settings.runs_dir))
    log = RunLog(settings.runs_dir, verbose)
    failed_run, errors, input_error = _execute(defs, settings, instance, log, force)
    ok = failed_run is None
    written = [path for path in list_runs(settings.runs_dir) if path not in before]
    for error in errors:
        print(error, file=sys.stderr)
    if not ok and settings.alerts is not None and "failed" in settings.alerts.on:
        _alert_failure(settings, instance, failed_run, errors)
    # The log goes into the run directory this pipeline wrote, never into an earlier one it points at.
    log_file = log.keep(written[0] if written else None, failed=not ok)
    run_dir = written[0] if written else _current_run_dir(defs, instance) if ok else None
    return _Outcome(ok, input_error, run_dir, log_file, tuple(errors))


def _alert_failure(settings, instance, run_id: str, errors: list[str]) -> None:
    """The failed run's alert (alerts.on: failed), as the nightly sensors send it for a night's runs: the sensors
    watch only nightly runs, and no daemon need be running for this one."""
    from rag_eval_assets.defs.automation import failed_run_alert

    what = failed_run_alert(settings, instance.get_run_by_id(run_id), errors[0] if errors else None)
    print(f"rag-eval: failure alert: {what}", file=sys.stderr)


def _current_run_dir(defs, instance) -> Path | None:
    """The run directory of the evaluation_run readers see now (None before the first)."""
    with _asset_values(defs, instance) as load:
        try:
            return Path(load("evaluation_run")["run_dir"].iloc[0])
        except FileNotFoundError:
            return None


@contextmanager
def _asset_values(defs, instance):
    """`load(asset, partition_key=None)`: an asset's value through its IO manager, as the assets read each other,
    wherever storage_dir is (a directory or an object store). Dagster's loader prints a DEBUG line per file it opens
    to stderr, through a console logger it builds for each load and takes no configuration for; logging's switch
    is process-wide, so DEBUG is off while it reads."""
    with defs.get_asset_value_loader(instance=instance) as loader:
        previous = logging.root.manager.disable
        logging.disable(logging.DEBUG)
        try:
            yield loader.load_asset_value
        finally:
            logging.disable(previous)


def _run(args: argparse.Namespace) -> int:
    from rag_eval_assets.definitions import build_defs
    from rag_eval_assets.reports.comparison import recorded_verdict
    from rag_eval_assets.runs.store import COMPARISON_JSON
    from rag_eval_assets.settings import load_settings

    settings = load_settings(args.config)
    defs = build_defs(settings.config_file)
    with _pipeline_instance(settings.config_file, None) as instance:
        outcome = _pipeline(defs, settings, instance, args.verbose, args.force)
    if not outcome.ok:
        # Never the verdict of a run that failed on something else (an outage's "no significant change", exit 0).
        print(outcome.failure_line())
    else:
        print(f"tables under {settings.assets_dir}")
        comparison = outcome.run_dir / COMPARISON_JSON if outcome.run_dir else None
        if comparison is not None:
            verdict = recorded_verdict(json.loads(comparison.read_text(encoding="utf-8"))) if comparison.is_file() \
                else "no baseline run yet: nothing to compare"
            print(f"verdict: {verdict}")
    # A failed run may still have written its run directory and report: say where either way.
    print(outcome.where())
    return outcome.exit_code


WHOLE_DOCUMENT = 10_000_000  # chunk_size_chars larger than any document: one chunk per document


def _evaluate(args: argparse.Namespace) -> int:
    from rag_eval_assets.corpus.gold import resolve_gold
    from rag_eval_assets.definitions import build_defs
    from rag_eval_assets.evalset.load import load_evalset
    from rag_eval_assets.metrics.trec import write_trec_qrels, write_trec_run
    from rag_eval_assets.settings import load_settings

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    corpus, evalset = Path(args.corpus).resolve(), Path(args.evalset).resolve()
    is_beir = (corpus / "corpus.jsonl").is_file()
    level = args.level or ("doc" if is_beir else "chunk")
    config = {
        "storage_dir": args.storage_dir or str(out / "store"),
        "corpus": {"id": args.corpus_id or corpus.name, "path": str(corpus), "language": args.language},
        "evalset": {"name": args.evalset_name or evalset.stem, "path": str(evalset)},
        "retrievers": args.retrievers.split(","),
        "k_values": [int(k) for k in args.k.split(",")],
        "retrieval": {"level": level, "dense": {"model": args.dense_model}},
        "runs_dir": str(out / "runs"),
    }
    ks = config["k_values"]
    config["answering"] = {"k_values": [k for k in (5, 10) if k <= max(ks)] or [max(ks)]}
    if args.chunk_size:
        config["chunking"] = {"chunk_size_chars": args.chunk_size, "overlap_chars": args.overlap}
    elif is_beir:
        # BEIR and MTEB embed each document whole: one chunk per document keeps the figures comparable
        # (measured: all-MiniLM-L6-v2 on XQuAD-ru gives MTEB's 0.2161 nDCG@10 whole, 0.157 chunked at 800).
        config["chunking"] = {"chunk_size_chars": WHOLE_DOCUMENT, "overlap_chars": 0}
    config_file = out / "rag_eval.yaml"
    config_file.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    settings = load_settings(config_file)
    defs = build_defs(config_file)
    with _pipeline_instance(config_file, out / "dagster") as instance:
        outcome = _pipeline(defs, settings, instance, args.verbose)
        if not outcome.ok:
            print(f"{outcome.failure_line()}\n{outcome.where()}")
            return outcome.exit_code
        with _asset_values(defs, instance) as load:
            aggregate = load("retrieval_metrics")
            per_query = load("retrieval_metrics_per_query")
            results = {r: load("retrieval_results", partition_key=r) for r in settings.retrievers}
            chunks = load("chunks")
            documents = load("corpus_documents")

    per_query.to_parquet(out / "per_query.parquet", index=False)
    overall = aggregate[aggregate["slice"] == "all"]
    summary = {
        "corpus": str(corpus),
        "evalset": str(evalset),
        "level": level,
        "chunk_size_chars": settings.chunking.chunk_size_chars,
        "overlap_chars": settings.chunking.overlap_chars,
        "metrics": {
            retriever: {
                f"{metric.replace('@k', '')}@{k}" if "@k" in metric else metric: round(float(value), 6)
                for metric, k, value in zip(group["metric"], group["k"], group["value"])
            }
            for retriever, group in overall.groupby("retriever")
        },
        "aggregate": aggregate.to_dict("records"),
    }
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for retriever, table in results.items():
        write_trec_run(table, out / f"run.{retriever}.trec", run_name=retriever, level=level)
    questions = load_evalset(evalset)
    doc_ids = documents["doc_id"].unique().tolist()
    write_trec_qrels(resolve_gold(questions, chunks, doc_ids), out / "qrels.trec", level=level)
    for retriever, metrics in summary["metrics"].items():
        shown = {m: v for m, v in metrics.items() if m.startswith(("ndcg@10", "recall@10", "mrr@10", "hit@10"))}
        print(f"{retriever}: {shown}")
    print(f"metrics: {out / 'metrics.json'}\nper-query table: {out / 'per_query.parquet'}")
    print(outcome.where())
    return 0


def _benchmark(args: argparse.Namespace) -> int:
    """Seed 000 section 6: every dataset through the whole pipeline, then one weighted score over them."""
    from rag_eval_assets.definitions import build_defs
    from rag_eval_assets.runs.benchmark import aggregate_benchmark, load_benchmark_config, require_rules
    from rag_eval_assets.settings import load_settings

    bench = load_benchmark_config(args.config_file)
    require_rules(bench, args.config_file)
    out = Path(args.out).resolve()
    cells: dict[tuple[str, int], list[dict]] = {}
    for dataset in bench.datasets:
        target = out / dataset.name
        target.mkdir(parents=True, exist_ok=True)
        config = {
            "storage_dir": str(target / "store"),
            "runs_dir": str(target / "runs"),
            "corpus": {"id": dataset.name, "path": str(dataset.corpus), "language": args.language},
            "evalset": {"name": dataset.name, "path": str(dataset.evalset)},
            "retrievers": args.retrievers.split(","),
            "k_values": [int(k) for k in args.k.split(",")],
            "answering": {"k_values": [int(k) for k in args.k.split(",")]},
        }
        config_file = target / "rag_eval.yaml"
        config_file.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
        settings = load_settings(config_file)
        defs = build_defs(config_file)
        with _pipeline_instance(config_file, target / "dagster") as instance:
            outcome = _pipeline(defs, settings, instance, args.verbose)
            if not outcome.ok:
                print(f"dataset {dataset.name}: {outcome.failure_line()}\n{outcome.where()}", file=sys.stderr)
                return outcome.exit_code
            with _asset_values(defs, instance) as load:
                table = load("answer_metrics")
        rows = table[(table["metric"] == "weighted_score") & (table["slice"] == "all")]
        for row in rows.itertuples():
            cells.setdefault((row.retriever, int(row.k)), []).append(
                {"name": dataset.name, "weight": dataset.weight, "weighted_score": float(row.value), "n": int(row.n)}
            )
    report = {
        "name": bench.name,
        "cells": [
            {"retriever": retriever, "k": k, **aggregate_benchmark(per_dataset)}
            for (retriever, k), per_dataset in sorted(cells.items())
        ],
    }
    (out / "benchmark.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for cell in report["cells"]:
        print(f"{cell['retriever']} k={cell['k']}: summary.weighted_score {cell['summary']['weighted_score']:.4f} "
              + ", ".join(f"{d['name']} {d['weighted_score']:.4f}" for d in cell["datasets"]))
    print(f"benchmark: {out / 'benchmark.json'}")
    return 0


def _score(args: argparse.Namespace) -> int:
    from rag_eval_assets.evalset.freeze import evalset_sha256
    from rag_eval_assets.evalset.load import load_evalset
    from rag_eval_assets.metrics.answers import load_answers, score_answers
    from rag_eval_assets.metrics.rule_score import DEFAULT_CITATION_PATTERN

    questions = load_evalset(args.evalset)
    answers = load_answers(args.answers, {q.id for q in questions})
    encoder = None
    if args.embedding_model:
        from rag_eval_assets.retrieval.encoders import get_encoder

        encoder = get_encoder(args.embedding_model)
    per_question, summary = score_answers(questions, answers, encoder, args.citation_pattern or DEFAULT_CITATION_PATTERN)
    summary["questions_sha256"] = evalset_sha256(args.evalset)
    if args.corpus:
        from rag_eval_assets.corpus.load import corpus_sha256

        summary["pdf_sha256"] = corpus_sha256(args.corpus)  # seed 000's name, over every file of the corpus
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    per_question.to_parquet(out / "per_question.parquet", index=False)
    wide = per_question.pivot_table(index="query_id", columns="metric", values="value", dropna=False).reset_index()
    wide.to_csv(out / "per_question.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if summary["weighted_score"] is None:
        print(f"weighted_score: not applicable (no question has seed 000 rules); {summary['n']} of "
              f"{summary['n_questions']} questions answered")
    else:
        print(f"weighted_score: {summary['weighted_score']:.4f} over the questions with seed 000 rules; "
              f"{summary['n']} of {summary['n_questions']} questions answered")
    print(f"per-question scores: {out / 'per_question.parquet'} (and .csv)\nsummary: {out / 'summary.json'}")
    return 0


MISSING_RUN = 3  # exit code of compare for a run directory that is missing or unreadable


def _configured(args: argparse.Namespace):
    """The settings of --config, or of the default configuration file when there is one; else None."""
    from rag_eval_assets.settings import default_config_path, load_settings

    path = Path(args.config) if args.config else default_config_path()
    return load_settings(path) if args.config or path.is_file() else None


def _gate(args: argparse.Namespace, defaults):
    """report.gate of the configuration (or the defaults), with every flag given on the command line on top;
    raises pydantic's ValidationError for a flag out of range."""
    flags = {name: getattr(args, name) for name in ("metric", "retrieval_metric", "min_delta", "max_regressions",
                                                   "alpha", "correction", "significant_only", "max_error_rate")}
    return type(defaults).model_validate({**defaults.model_dump(), **{k: v for k, v in flags.items() if v is not None}})


def _compare(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from rag_eval_assets.reports.comparison import comparison_markdown, format_comparison
    from rag_eval_assets.verdict.compare import compare_runs
    from rag_eval_assets.verdict.settings import GateSettings
    from rag_eval_assets.runs.store import COMPARISON_JSON, COMPARISON_MD, read_run
    from rag_eval_assets.settings_base import problems

    settings = _configured(args)
    try:
        gate = _gate(args, settings.report.gate if settings else GateSettings())
    except ValidationError as exc:
        for key, message in problems(exc, GateSettings):
            print(f"error: --{key.replace('_', '-')}: {message}", file=sys.stderr)
        return 2
    runs = []
    for role, given in (("base", args.base), ("candidate", args.cand)):
        path = Path(given)
        if not path.is_dir() and settings is not None and (settings.runs_dir / given).is_dir():
            path = settings.runs_dir / given
        try:
            runs.append(read_run(path))
        except InputError as exc:
            print(f"error: the {role} run {given} cannot be read: {exc}", file=sys.stderr)
            return MISSING_RUN
    comparison = compare_runs(*runs, gate, ignore_invariants=args.ignore_invariants,
                              retrievers=args.retriever or None, ks=args.k or None)
    print(format_comparison(comparison))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {**comparison.as_json(), "baseline": {"run_id": comparison.base_id, "policy": "given to rag-eval compare"}}
    (out / COMPARISON_JSON).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / COMPARISON_MD).write_text(comparison_markdown(comparison), encoding="utf-8")
    print(f"comparison: {out / COMPARISON_JSON} and {out / COMPARISON_MD}")
    return comparison.exit_code


def _baseline(args: argparse.Namespace) -> int:
    from rag_eval_assets.evalset.freeze import eval_set_version, evalset_sha256
    from rag_eval_assets.runs.baseline import accept, choose_baseline

    settings = _configured(args)
    if args.action == "accept":
        path = Path(args.run)
        if not path.is_dir() and settings is not None:
            path = settings.runs_dir / args.run
        try:
            marker = accept(path, args.note)
        except InputError as exc:
            print(f"error: the run {args.run} cannot be read: {exc}", file=sys.stderr)
            return MISSING_RUN
        print(f"accepted {path.name} as a baseline: later runs of its evalset compare with it ({marker})")
        not_good = json.loads(marker.read_text(encoding="utf-8"))["not_good"]
        if not_good:
            print(f"although it is not a good run: {not_good}")
        return 0
    if settings is None:
        print("error: no rag_eval.yaml here; give --config", file=sys.stderr)
        return 2
    version = eval_set_version(settings.evalset.name, evalset_sha256(settings.evalset.path))
    chosen = choose_baseline(settings.runs_dir, version, pinned=settings.report.baseline_run_id,
                             config_file=str(settings.config_file))
    print(f"baseline of the next run of {version}: {chosen.path.name if chosen.path else 'none yet'}")
    print(f"policy: {chosen.policy}")
    for skipped in chosen.skipped:
        print(f"skipped {skipped.run_id}: {skipped.why}")
    return 0


def _history(args: argparse.Namespace) -> int:
    from rag_eval_assets.runs.history import format_history, run_history

    if args.runs_dir:
        runs_dir = Path(args.runs_dir)
    else:
        settings = _configured(args)
        if settings is None:
            print("error: no rag_eval.yaml here; give --config or --runs-dir", file=sys.stderr)
            return 2
        runs_dir = settings.runs_dir
    entries = run_history(runs_dir, args.metric, retriever=args.retriever, last=args.last)
    print(f"runs in {runs_dir}, newest first:")
    print(format_history(entries, args.metric), end="")
    return 0


def _backfill(args: argparse.Namespace) -> int:
    """A real Dagster backfill (listed in the UI under Overview > Backfills), run by the daemon: start `make ui`
    (dagster dev) or `dagster-daemon run` to have its runs launched."""
    import subprocess

    from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, GRID_JOB
    from rag_eval_assets.defs.partitions import answer_grid_partitions
    from rag_eval_assets.settings import load_settings

    settings = load_settings(args.config)
    if args.grid == "retrieval":
        if args.k is not None:
            print("error: the retrieval grid has no k dimension; use --grid answers with --k", file=sys.stderr)
            return 2
        job, keys = GRID_JOB, [r for r in settings.retrievers if args.retriever in (None, r)]
    else:
        job = ANSWER_GRID_JOB
        keys = [
            str(key)
            for key in answer_grid_partitions(settings).get_partition_keys()
            if args.retriever in (None, key.keys_by_dimension["retriever"])
            and args.k in (None, int(key.keys_by_dimension["k"]))
        ]
    if not keys:
        print(f"error: no partition of {job} matches --retriever {args.retriever} --k {args.k} "
              f"(retrievers: {list(settings.retrievers)}, answer k values: {list(settings.answering.k_values)})",
              file=sys.stderr)
        return 2
    _dagster_home(settings.config_file)  # where the backfill is recorded for the daemon to launch its runs
    env = {**os.environ, "RAG_EVAL_CONFIG": str(settings.config_file)}
    command = [str(Path(sys.executable).parent / "dagster"), "job", "backfill", "-m", "rag_eval_assets.definitions",
               "-j", job, "--partitions", ",".join(keys), "--noprompt"]
    print(f"backfilling {job} partitions {keys}")
    return subprocess.run(command, env=env, check=False).returncode


def _label(args: argparse.Namespace) -> int:
    from rag_eval_assets.labeling.command import label
    from rag_eval_assets.labeling.grade_command import grade

    settings = _configured(args)
    if settings is None:
        print("error: no rag_eval.yaml here; give --config (the corpus to retrieve from)", file=sys.stderr)
        return 2
    if args.grade is not None or args.only == DISAGREEMENTS:
        from rag_eval_assets.defs.storage.table_store import TableStore

        return grade(settings, args, TableStore(settings.assets_dir).locate)
    return label(settings, Path(args.evalset), args.retriever, args.sut_url, args.k, args.only)


def _global_options(after_the_command: bool) -> argparse.ArgumentParser:
    """--config and --verbose, before the command or after it: after it they have no defaults of their own, so
    that they override what was given before and leave it alone otherwise."""
    options = argparse.ArgumentParser(add_help=False)
    default = {"default": argparse.SUPPRESS} if after_the_command else {}
    options.add_argument("--config", help="configuration file (default: $RAG_EVAL_CONFIG or ./rag_eval.yaml)",
                         **default)
    options.add_argument("-v", "--verbose", action="store_true",
                         help="the whole log on the terminal too (Dagster's events of every step, DEBUG up)", **default)
    return options


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-eval", description=__doc__, parents=[_global_options(False)])
    after = _global_options(True)

    def command(actions, name: str, **kwargs) -> argparse.ArgumentParser:
        return actions.add_parser(name, parents=[after], **kwargs)

    sub = parser.add_subparsers(dest="command", required=True)
    run = command(sub, "run", help="materialize what is missing or stale on the configured corpus and evalset")
    run.add_argument("--force", action="store_true", help="recompute every asset, stale or not")
    run.set_defaults(func=_run)
    ev = command(sub, "evaluate", help="evaluate retrievers on a corpus and evalset (BEIR folders included)")
    ev.add_argument("--corpus", required=True, help="a BEIR folder (corpus.jsonl) or a folder of md/pdf/txt files")
    ev.add_argument("--evalset", required=True, help="an evalset file or a BEIR folder (queries.jsonl + qrels)")
    ev.add_argument("--retrievers", default="bm25,dense,hybrid")
    ev.add_argument("--k", default="1,3,5,10,20")
    ev.add_argument("--out", required=True, help="output directory")
    ev.add_argument("--storage-dir", help="where the tables go: a directory or an fsspec URL (default: OUT/store)")
    ev.add_argument("--level", choices=("chunk", "doc"), help="default: doc for BEIR corpora, chunk otherwise")
    ev.add_argument("--language", default="multi", help="bm25 analyzer: en, ru, zh or multi")
    ev.add_argument("--dense-model", default="all-MiniLM-L6-v2")
    ev.add_argument("--chunk-size", type=int,
                    help="chunk_size_chars (default: one chunk per document for BEIR corpora, else 800)")
    ev.add_argument("--overlap", type=int, default=100, help="overlap_chars with --chunk-size")
    ev.add_argument("--corpus-id", help="corpus id in chunk ids (default: the folder name)")
    ev.add_argument("--evalset-name", help="evalset version name (default: the file or folder name)")
    ev.set_defaults(func=_evaluate)
    sc = command(sub, "score", help="score answers produced elsewhere against an evalset")
    sc.add_argument("--evalset", required=True, help="an evalset file in any supported format")
    sc.add_argument("--answers", required=True, help="JSONL: id, answer, optional contexts [{source_path, text}]")
    sc.add_argument("--out", required=True, help="output directory")
    sc.add_argument("--corpus", help="the corpus the answers came from (its sha256 goes into the summary)")
    sc.add_argument("--embedding-model", help="compute semantic similarity with this model (e.g. all-MiniLM-L6-v2)")
    sc.add_argument("--citation-pattern", help="regex for a page citation (default: стр. N)")
    sc.set_defaults(func=_score)
    cmp = command(
        sub, "compare", help="the verdict on a candidate run against a baseline run: exit 0 better or no significant "
        "change, 1 worse, 2 incompatible runs, 3 a run directory missing or unreadable"
    )
    cmp.add_argument("--base", required=True, help="baseline run: a run directory, or a run id of the configured store")
    cmp.add_argument("--cand", required=True, help="candidate run: a run directory or run id")
    cmp.add_argument("--out", default=".", help="where comparison.json and comparison.md go (default: here)")
    cmp.add_argument("--ignore-invariants", action="store_true", help="compare runs with different evalsets/judges")
    cmp.add_argument("--retriever", action="append", help="limit the gate to this retriever (repeatable)")
    cmp.add_argument("--k", action="append", type=int, help="limit the gate to this k (repeatable)")
    gate = cmp.add_argument_group("gate", "default: report.gate of the configuration file, else the defaults shown")
    gate.add_argument("--metric", help="gate metric per cell: auto (default), or e.g. ndcg@k, hit@k, weighted_score")
    gate.add_argument("--retrieval-metric", help="what auto falls back to without an answer metric (ndcg@k)")
    gate.add_argument("--min-delta", type=float, help="a cell fails when its delta is below this (0.0)")
    gate.add_argument("--max-regressions", type=int, help="a cell fails with more success->failure flips (off)")
    gate.add_argument("--alpha", type=float, help="significance level of the paired tests (0.05)")
    gate.add_argument("--correction", choices=CORRECTIONS,
                      help="multiple-testing correction across the judged cells (joint: step-down max-T)")
    gate.add_argument("--significant-only", action=argparse.BooleanOptionalAction, default=None,
                      help="failures count only where the cell's change is significant (default: on)")
    gate.add_argument("--max-error-rate", type=float,
                      help="do not compare a metric whose calls failed more often than this in either run (0.05)")
    cmp.set_defaults(func=_compare)
    hist = command(sub, "history", help="the runs in the store with their evalset, headline metric and verdict")
    hist.add_argument("--metric", default="ndcg@10", help="metric@k to show per retriever (ndcg@10)")
    hist.add_argument("--retriever", help="only this retriever's values")
    hist.add_argument("--last", type=int, help="only the newest N runs")
    hist.add_argument("--runs-dir", help="the run store (default: runs_dir of the configuration)")
    hist.set_defaults(func=_history)
    bl = command(sub, "baseline", help="the run later runs compare with: show it, or accept a run as one")
    bl_actions = bl.add_subparsers(dest="action", required=True)
    accept = command(bl_actions, "accept", help="accept RUN (e.g. worse on purpose) as the baseline of later runs")
    accept.add_argument("run", help="a run id of the configured store, or a run directory")
    accept.add_argument("--note", help="why it is accepted (kept in the run's accepted.json)")
    command(bl_actions, "show", help="the run the next run of the configured evalset compares with, and why")
    bl.set_defaults(func=_baseline)
    bm = command(sub, "benchmark", help="several datasets (corpus + evalset each), one aggregated weighted score")
    bm.add_argument("--config-file", required=True, help="YAML/JSON: name, datasets [{name, corpus, evalset, weight}]")
    bm.add_argument("--out", required=True, help="output directory (one sub-directory per dataset)")
    bm.add_argument("--retrievers", default="bm25,dense,hybrid")
    bm.add_argument("--k", default="5", help="k values of the answer grid (and of retrieval)")
    bm.add_argument("--language", default="multi", help="bm25 analyzer: en, ru, zh or multi")
    bm.set_defaults(func=_benchmark)
    bf = command(sub, "backfill", help="backfill the partitions of one retriever or one k (run by the daemon)")
    bf.add_argument("--retriever", help="every partition of this retriever")
    bf.add_argument("--k", type=int, help="every partition of this k (answer grid)")
    bf.add_argument("--grid", choices=("answers", "retrieval"), default="answers",
                    help="answers: answers and judged answers (retriever x k); retrieval: retrieval results")
    bf.set_defaults(func=_backfill)
    lb = command(sub, "label", help="label gold supports in a full-screen terminal app (seed 002 label_eval.py)")
    lb.add_argument("--evalset", required=True, help="a seed 002 or seed 001 JSONL (or a plain id/question list)")
    source = lb.add_mutually_exclusive_group()
    source.add_argument("--retriever", help="a configured retriever of our own over the configured corpus "
                        "(default: hybrid when configured, else the first)")
    source.add_argument("--sut-url", help="the HTTP service under test instead, asked with debug=true and K=k")
    lb.add_argument("--k", type=int, default=20, help="chunks shown per question (default 20)")
    lb.add_argument("--only", choices=("unlabeled", "failing", "all", DISAGREEMENTS), default="all",
                    help="unlabeled: no gold yet; failing: gold not in the top k of the latest run; "
                    "disagreements (with --grade): grades more than a point from the judge's score")
    add_grade_arguments(lb)
    lb.set_defaults(func=_label)
    return parser


# Progress bars of third-party libraries (the "Loading weights" of transformers) are noise in a terminal and in a
# CI log. Both are read when tqdm and huggingface_hub are imported, which the CLI does only after main() starts.
QUIET_PROGRESS = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name, value in QUIET_PROGRESS.items():
        os.environ.setdefault(name, value)
    install_log_redaction()  # the terminal shows log lines (retry warnings, failed calls) with their URLs
    # Dagster flags the beta `data_version` argument on every run; it says nothing to a user of this CLI.
    warnings.filterwarnings("ignore", message=".*is currently in beta.*")
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {redact_text(str(exc))}", file=sys.stderr)
        return INPUT_ERROR


if __name__ == "__main__":
    sys.exit(main())
