"""How the verdict writes its numbers: in the reasons it records, and in every report that shows them."""

from __future__ import annotations

import math


def p_text(value: float | None) -> str:
    if value is None:
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def signed(value: float | None, digits: int = 4) -> str:
    # +0.0 turns a -0.0 left by rounding into +0.0000.
    return "—" if value is None else f"{round(value, digits) + 0.0:+.{digits}f}"


def interval_text(low: float | None, high: float | None, digits: int = 4, *, tested: bool = True) -> str:
    """[low, high]; a bound the test could not set (infinite, stored as null) is -inf / +inf; "—" when untested."""
    if not tested:
        return "—"
    def bound(value: float | None, infinite: str) -> str:
        return infinite if value is None or math.isinf(value) else signed(value, digits)
    return f"[{bound(low, '-inf')}, {bound(high, '+inf')}]"


def graded_n(graded_base: int, answers_base: int | None, graded_cand: int, answers_cand: int | None) -> str:
    """The n a calibrated difference rests on, to write beside its interval: "n 12 grades of 14 answers in the base
    run, 12 grades of 14 answers in the candidate" (records written before the answers were counted: grades only)."""
    def of(graded: int, answers: int | None) -> str:
        return f"{graded} grades" + ("" if answers is None else f" of {answers} answers")
    return f"n {of(graded_base, answers_base)} in the base run, {of(graded_cand, answers_cand)} in the candidate"
