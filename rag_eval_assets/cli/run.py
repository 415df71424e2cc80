"""`rag-eval run` and `backfill`: the pipeline of the configured corpus and evalset, in DAGSTER_HOME's instance
(run in this process, or a backfill the daemon runs)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rag_eval_assets.cli.pipeline import dagster_home, run_and_read


def _run(args: argparse.Namespace) -> int:
    if args.dry_run:
        from rag_eval_assets.cli.dry_run import dry_run_text
        from rag_eval_assets.settings import load_settings

        print(dry_run_text(load_settings(args.config)))
        return 0
    from rag_eval_assets.reports.comparison import recorded_verdict
    from rag_eval_assets.runs.store import COMPARISON_JSON

    from rag_eval_assets.generation.settings import spot_check

    overrides = spot_check(args.spot_check) if args.spot_check else None
    outcome, settings, _ = run_and_read(args.config, None, args.verbose, args.force, overrides=overrides)
    # A failed run said why first (cli/pipeline.py), and never gets a verdict line: that of a run that failed on
    # something else would mislead (an outage's "no significant change", exit 0).
    if outcome.ok:
        print(f"tables under {settings.assets_dir}")
        comparison = outcome.run_dir / COMPARISON_JSON if outcome.run_dir else None
        if comparison is not None:
            verdict = recorded_verdict(json.loads(comparison.read_text(encoding="utf-8"))) if comparison.is_file() \
                else "no baseline run yet: nothing to compare"
            print(f"verdict: {verdict}")
    # A failed run may still have written its run directory and report: say where either way.
    print(outcome.where())
    return outcome.exit_code


def _backfill(args: argparse.Namespace) -> int:
    """A real Dagster backfill (listed in the UI under Overview > Backfills), run by the daemon: start `make ui`
    (dagster dev) or `dagster-daemon run` to have its runs launched."""
    import subprocess

    from rag_eval_assets.defs.jobs import ANSWER_GRID_JOB, GRID_JOB
    from rag_eval_assets.defs.infrastructure import check_infrastructure
    from rag_eval_assets.defs.partitions import answer_grid_partitions
    from rag_eval_assets.settings import load_settings

    settings = load_settings(args.config)
    check_infrastructure(settings)
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
    dagster_home(settings.config_file)  # where the backfill is recorded for the daemon to launch its runs
    env = {**os.environ, "RAG_EVAL_CONFIG": str(settings.config_file)}
    command = [str(Path(sys.executable).parent / "dagster"), "job", "backfill", "-m", "rag_eval_assets.definitions",
               "-j", job, "--partitions", ",".join(keys), "--noprompt"]
    print(f"backfilling {job} partitions {keys}")
    return subprocess.run(command, env=env, check=False).returncode


def add_run(sub, parents: list[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", parents=parents,
                         help="materialize what is missing or stale on the configured corpus and evalset")
    run.add_argument("--force", action="store_true", help="recompute every asset, stale or not")
    run.add_argument("--dry-run", action="store_true",
                     help="list the variants (a sweep's expanded), chunkings, indexes and partitions; start nothing")
    add_spot_check(run)
    run.set_defaults(func=_run)


def add_spot_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spot-check", type=_positive, metavar="N",
                        help="re-judge N judged answers once more and report how far the judge agrees with itself "
                        "(judge.replicates 1, judge.replicate_sample N for this run)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_backfill(sub, parents: list[argparse.ArgumentParser]) -> None:
    bf = sub.add_parser("backfill", parents=parents,
                        help="backfill the partitions of one retriever or one k (run by the daemon)")
    bf.add_argument("--retriever", help="every partition of this retriever")
    bf.add_argument("--k", type=int, help="every partition of this k (answer grid)")
    bf.add_argument("--grid", choices=("answers", "retrieval"), default="answers",
                    help="answers: answers and judged answers (retriever x k); retrieval: retrieval results")
    bf.set_defaults(func=_backfill)
