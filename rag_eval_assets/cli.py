"""`rag-eval`: run the pipeline and its checks from a terminal or a CI job."""

from __future__ import annotations

import argparse
import sys

from rag_eval_assets.errors import InputError


def _run(args: argparse.Namespace) -> int:
    # Imported here so `rag-eval --help` stays fast and other subcommands need no Dagster instance.
    import dagster as dg

    from rag_eval_assets.definitions import build_defs
    from rag_eval_assets.settings import load_settings

    settings = load_settings(args.config)
    defs = build_defs(settings.config_file)
    job = defs.resolve_implicit_global_asset_job_def()
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    print(f"run {result.run_id}: {'succeeded' if result.success else 'FAILED'}")
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        rows = mat.metadata.get("dagster/row_count")
        print(f"  {mat.asset_key.to_user_string():<24} {rows.value if rows else '-':>8} rows")
    for event in result.get_asset_check_evaluations():
        status = "passed" if event.passed else "FAILED"
        print(f"  check {event.asset_key.to_user_string()}:{event.check_name} {status}")
    if not result.success:
        for event in result.all_events:
            if event.is_failure and event.step_failure_data is not None:
                print(event.step_failure_data.error.message.rstrip(), file=sys.stderr)
        return 1
    print(f"tables written under {settings.assets_dir}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-eval", description=__doc__)
    parser.add_argument("--config", help="configuration file (default: $RAG_EVAL_CONFIG or ./rag_eval.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="materialize every asset on the configured corpus and evalset")
    run.set_defaults(func=_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
