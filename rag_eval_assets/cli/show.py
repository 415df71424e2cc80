"""`rag-eval show`: one question of a recorded run in full, beside another run's."""

from __future__ import annotations

import argparse
import sys

from rag_eval_assets.cli.config import configured, given_run

MISSING = 3  # a run directory missing or unreadable, or a question neither run has


def _show(args: argparse.Namespace) -> int:
    from rag_eval_assets.reports.question_view import format_question

    settings = configured(args)
    runs = []
    for given in (args.run, args.against):
        if given is None:
            runs.append(None)
            continue
        run = given_run(given, settings, "the run")
        if run is None:
            return MISSING
        runs.append(run)
    try:
        print(format_question(runs[0], args.question, runs[1]), end="")
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return MISSING
    return 0


def add_show(sub, parents: list[argparse.ArgumentParser]) -> None:
    show = sub.add_parser("show", parents=parents,
                          help="one question of a run in full: what each retriever retrieved (gold marked), its "
                               "metrics and answers; with --against, beside another run's")
    show.add_argument("run", help="a run directory, or a run id of the configured store")
    show.add_argument("--question", required=True, help="the question's id")
    show.add_argument("--against", help="another run (the base side): both side by side")
    show.set_defaults(func=_show)
