"""The grades the gate uses, read once for a comparison: the grades file beside the configured evalset
(judging/grades.py) with the judge settings' trust_kappa and min_grades. Both callers of compare_runs (the
pipeline's run directory and `rag-eval compare`) load them here, so that the verdict itself never reads a file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rag_eval_assets.generation.settings import JudgeSettings
from rag_eval_assets.judging.agreement import MINIMUM_PAIRS, TRUST_KAPPA
from rag_eval_assets.judging.grades import Grade, GradeKey, grades_path, load_grades


@dataclass(frozen=True)
class Grading:
    """The person's grades the gate may use (judging/grades.py load_grades), and judge.trust_kappa / min_grades."""

    grades: Mapping[GradeKey, Grade] = field(default_factory=dict)
    trust_kappa: float = TRUST_KAPPA
    min_grades: int = MINIMUM_PAIRS


def configured_grading(evalset: Path, judge: JudgeSettings) -> Grading:
    """The grades of `evalset` (none when it has no grades file); InputError naming the line of a bad grade."""
    return Grading(load_grades(grades_path(evalset)), judge.trust_kappa, judge.min_grades)
