"""`rag-eval compare`, `baseline` and `history`: the runs recorded in a run store, read and compared without
running anything."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_eval_assets.cli.config import configured, given_run
from rag_eval_assets.errors import InputError
from rag_eval_assets.verdict.corrections import CORRECTIONS

MISSING_RUN = 3  # exit code of compare for a run directory that is missing or unreadable


def _gate(args: argparse.Namespace, defaults):
    """report.gate of the configuration (or the defaults), with every flag given on the command line on top;
    raises pydantic's ValidationError for a flag out of range."""
    flags = {name: getattr(args, name) for name in ("metric", "retrieval_metric", "min_delta", "max_regressions",
                                                   "alpha", "correction", "significant_only", "max_error_rate",
                                                   "calibrated", "top_questions")}
    return type(defaults).model_validate({**defaults.model_dump(), **{k: v for k, v in flags.items() if v is not None}})


def _compare(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from rag_eval_assets.judging.grading import configured_grading
    from rag_eval_assets.reports.comparison import comparison_markdown, format_comparison, format_explained
    from rag_eval_assets.verdict.compare import compare_runs
    from rag_eval_assets.verdict.settings import GateSettings
    from rag_eval_assets.runs.store import COMPARISON_JSON, COMPARISON_MD
    from rag_eval_assets.settings_base import problems

    settings = configured(args)
    try:
        gate = _gate(args, settings.report.gate if settings else GateSettings())
    except ValidationError as exc:
        for key, message in problems(exc, GateSettings):
            print(f"error: --{key.replace('_', '-')}: {message}", file=sys.stderr)
        return 2
    runs = []
    for role, given in (("base", args.base), ("candidate", args.cand)):
        run = given_run(given, settings, f"the {role} run")
        if run is None:
            return MISSING_RUN
        runs.append(run)
    try:
        grading = configured_grading(settings.evalset.path, settings.judge) if settings is not None else None
    except InputError as exc:
        print(f"error: the grades of the evalset cannot be read: {exc}", file=sys.stderr)
        return 2
    explain = [args.explain] if args.explain else []
    try:
        comparison = compare_runs(*runs, gate, ignore_invariants=args.ignore_invariants,
                                  retrievers=args.retriever or None, ks=args.k or None, grading=grading,
                                  explain=explain)
    except KeyError as exc:
        print(f"error: --explain {args.explain}: {exc.args[0]}", file=sys.stderr)
        return 2
    print(format_explained(comparison, args.explain) if explain else format_comparison(comparison))
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

    settings = configured(args)
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
        settings = configured(args)
        if settings is None:
            print("error: no rag_eval.yaml here; give --config or --runs-dir", file=sys.stderr)
            return 2
        runs_dir = settings.runs_dir
    entries = run_history(runs_dir, args.metric, retriever=args.retriever, last=args.last)
    print(f"runs in {runs_dir}, newest first:")
    print(format_history(entries, args.metric), end="")
    return 0


def add_compare(sub, parents: list[argparse.ArgumentParser]) -> None:
    cmp = sub.add_parser(
        "compare", parents=parents, help="the verdict on a candidate run against a baseline run: exit 0 better or no "
        "significant change, 1 worse, 2 incompatible runs, 3 a run directory missing or unreadable"
    )
    cmp.add_argument("--base", required=True, help="baseline run: a run directory, or a run id of the configured store")
    cmp.add_argument("--cand", required=True, help="candidate run: a run directory or run id")
    cmp.add_argument("--out", default=".", help="where comparison.json and comparison.md go (default: here)")
    cmp.add_argument("--ignore-invariants", action="store_true", help="compare runs with different evalsets/judges")
    cmp.add_argument("--retriever", action="append", help="limit the gate to this retriever (repeatable)")
    cmp.add_argument("--k", action="append", type=int, help="limit the gate to this k (repeatable)")
    cmp.add_argument("--explain", metavar="CELL",
                     help="print one cell (e.g. bm25@10) in full: its questions that moved most, each with what both "
                          "runs retrieved side by side, instead of the whole comparison")
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
    gate.add_argument("--calibrated", action=argparse.BooleanOptionalAction, default=None,
                      help="judge a judge metric's cell on the runs' calibrated means, from the grades beside the "
                           "configured evalset (default: off)")
    gate.add_argument("--top-questions", type=int,
                      help="questions listed by name: regressions, improvements, and per deciding cell (10)")
    cmp.set_defaults(func=_compare)


def add_history(sub, parents: list[argparse.ArgumentParser]) -> None:
    hist = sub.add_parser("history", parents=parents,
                          help="the runs in the store with their evalset, headline metric and verdict")
    hist.add_argument("--metric", default="ndcg@10", help="metric@k to show per retriever (ndcg@10)")
    hist.add_argument("--retriever", help="only this retriever's values")
    hist.add_argument("--last", type=int, help="only the newest N runs")
    hist.add_argument("--runs-dir", help="the run store (default: runs_dir of the configuration)")
    hist.set_defaults(func=_history)


def add_baseline(sub, parents: list[argparse.ArgumentParser]) -> None:
    bl = sub.add_parser("baseline", parents=parents,
                        help="the run later runs compare with: show it, or accept a run as one")
    actions = bl.add_subparsers(dest="action", required=True)
    accept = actions.add_parser("accept", parents=parents,
                                help="accept RUN (e.g. worse on purpose) as the baseline of later runs")
    accept.add_argument("run", help="a run id of the configured store, or a run directory")
    accept.add_argument("--note", help="why it is accepted (kept in the run's accepted.json)")
    actions.add_parser("show", parents=parents,
                       help="the run the next run of the configured evalset compares with, and why")
    bl.set_defaults(func=_baseline)
