"""The grades the gate uses, read once for a comparison: the grades file beside the configured evalset
(labeling/grades.py) with the judge settings' trust_kappa and min_grades. Both callers of compare_runs (the
pipeline's run directory and `rag-eval compare`) load them here, so that the verdict itself never reads a file."""

from __future__ import annotations

from pathlib import Path

from rag_eval_assets.generation.settings import JudgeSettings
from rag_eval_assets.labeling.grades import grades_path, load_grades
from rag_eval_assets.verdict.judged import Grading


def configured_grading(evalset: Path, judge: JudgeSettings) -> Grading:
    """The grades of `evalset` (none when it has no grades file); InputError naming the line of a bad grade."""
    return Grading(load_grades(grades_path(evalset)), judge.trust_kappa, judge.min_grades)
