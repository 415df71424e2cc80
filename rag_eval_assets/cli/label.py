"""`rag-eval label`: label gold supports of an evalset, or grade a run's judged answers (--grade), in a terminal
app (the work is labeling/'s)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rag_eval_assets.cli.config import configured
from rag_eval_assets.labeling.grade_command import DISAGREEMENTS, add_grade_arguments


def _label(args: argparse.Namespace) -> int:
    from rag_eval_assets.labeling.command import label
    from rag_eval_assets.labeling.grade_command import grade

    settings = configured(args)
    if settings is None:
        print("error: no rag_eval.yaml here; give --config (the corpus to retrieve from)", file=sys.stderr)
        return 2
    if args.grade is not None or args.only == DISAGREEMENTS:
        from rag_eval_assets.defs.storage.table_store import TableStore

        return grade(settings, args, TableStore(settings.assets_dir).locate)
    return label(settings, Path(args.evalset), args.retriever, args.sut_url, args.k, args.only)


def add_label(sub, parents: list[argparse.ArgumentParser]) -> None:
    lb = sub.add_parser("label", parents=parents,
                        help="label gold supports in a full-screen terminal app (seed 002 label_eval.py)")
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
