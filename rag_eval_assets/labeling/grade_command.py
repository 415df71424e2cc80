"""`rag-eval label --grade RUN`: a person grades a run's judged answers on the judges' own scales.

The arguments are added to the label command's parser here (add_grade_arguments); `grade` runs it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag_eval_assets.labeling.judged_run import StoredTable
    from rag_eval_assets.settings import Settings

DISAGREEMENTS = "disagreements"  # --only: the answers graded before whose grade the judge's score is off
SAMPLE = "all"  # --only's default: with --grade, the stratified sample
DEFAULT_N = 30


def add_grade_arguments(parser: argparse.ArgumentParser) -> None:
    grading = parser.add_argument_group(
        "grading", "grade a run's judged answers on the judges' 0-5 scales; grades go to EVALSET.grades.jsonl")
    grading.add_argument("--grade", metavar="RUN", help="a run id of the configured store, or a run directory")
    grading.add_argument("--n", type=int, default=DEFAULT_N,
                         help=f"answers in the sample, spread over retriever and k (default {DEFAULT_N})")
    grading.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0): same seed, same sample")


def grade(settings: Settings, args: argparse.Namespace, stored: StoredTable | None) -> int:
    """Grade the sample (`--only all`) or the disagreements (`--only disagreements`) of run `args.grade`;
    `stored` finds a table of the store, for the whole judge inputs a run directory cuts."""
    # Imported here, not above: every rag-eval command builds the parser (add_grade_arguments), few grade.
    from rag_eval_assets.evalset.load import load_evalset
    from rag_eval_assets.labeling.grade_app import GradeApp
    from rag_eval_assets.labeling.grade_session import GradeItem, GradeSession
    from rag_eval_assets.judging.grades import DISAGREEMENT_POINTS, grades_path, load_grades
    from rag_eval_assets.labeling.judged_run import disagreements, read_judged_answers, resolve_run, stratified_sample

    if args.grade is None:
        print(f"error: --only {DISAGREEMENTS} grades a run's answers: give --grade RUN", file=sys.stderr)
        return 2
    if args.only not in (SAMPLE, DISAGREEMENTS):
        print(f"error: --grade takes --only {DISAGREEMENTS} (or none), not --only {args.only}", file=sys.stderr)
        return 2
    if args.n < 1:
        print(f"error: --n must be at least 1, got {args.n}", file=sys.stderr)
        return 2
    evalset = Path(args.evalset)
    if evalset.resolve() != Path(settings.evalset.path).resolve():
        # Grades go beside the evalset; the pipeline reads them beside the configured one only.
        print(f"error: --evalset {evalset} is not the configured evalset {settings.evalset.path} (evalset.path of "
              f"{settings.config_file}): its grades would land where the pipeline never reads them; give --evalset "
              f"{settings.evalset.path}", file=sys.stderr)
        return 2
    questions = {q.id: q for q in load_evalset(evalset)}
    run, answers, notes = read_judged_answers(resolve_run(args.grade, settings.runs_dir), stored)
    for note in notes:
        print(note, file=sys.stderr)
    path = grades_path(evalset)
    if args.only == DISAGREEMENTS:
        items = [GradeItem(a, judges) for a, judges in disagreements(answers, load_grades(path))]
        if not items:
            print(f"no disagreement: no grade in {path} is more than {DISAGREEMENT_POINTS} point(s) from the judge's "
                  f"score in run {run.run_id}")
            return 0
    else:
        items = [GradeItem(a, tuple(a.judgments)) for a in stratified_sample(answers, args.n, args.seed)]
    session = GradeSession(items, path, run.run_id, questions)
    GradeApp(session).run()
    if session.backup:
        print(f"backup: {session.backup}")
    print(f"{session.saved} grade(s) written to {path}; {session.graded} of {len(items)} answer(s) fully graded, "
          f"{len(session.skipped)} skipped")
    return 0
