"""`rag-eval`: run the pipeline and evaluate collections from a terminal or a CI job."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from rag_eval_assets.cli.compare import add_baseline, add_compare, add_history
from rag_eval_assets.cli.evaluate import add_benchmark, add_evaluate, add_score
from rag_eval_assets.cli.label import add_label
from rag_eval_assets.cli.nightly import add_nightly
from rag_eval_assets.cli.pipeline import INPUT_ERROR
from rag_eval_assets.cli.run import add_backfill, add_run
from rag_eval_assets.cli.show import add_show
from rag_eval_assets.errors import InfrastructureError, InputError
from rag_eval_assets.redaction import install_log_redaction, redact_text

# The commands in the order `rag-eval --help` lists them.
COMMANDS = (add_run, add_evaluate, add_score, add_compare, add_show, add_history, add_baseline, add_benchmark,
            add_backfill, add_nightly, add_label)


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
    sub = parser.add_subparsers(dest="command", required=True)
    after = [_global_options(True)]
    for add in COMMANDS:
        add(sub, after)
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
    except InfrastructureError as exc:  # checked before any run: one line per problem, never a trace
        for line in exc.problems:
            print(f"error: {redact_text(line)}", file=sys.stderr)
        return INPUT_ERROR
