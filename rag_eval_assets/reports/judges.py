"""How the judges' worth reads, from metrics.json's `judges` section (judging/summary.py computes it): sentences and
table rows that summary.md, report.html and the evaluation_run asset's metadata share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_eval_assets.judging.agreement import SCALE
from rag_eval_assets.judging.summary import NO_SPOT_CHECK
from rag_eval_assets.reports.markdown import markdown_table

TITLE = "Can the judge be trusted?"
AGREEMENT_HEADERS = ["judge", "graded", "exact", "within one", "kappa", "Spearman", "bias (judge − person)", "trust"]
SELF_HEADERS = ["judge", "re-judged", "same score", "mean abs. difference"]
ESTIMATE_HEADERS = ["judge", "retriever", "k", "answers", "judge mean", "naive 95% CI", "graded", "calibrated",
                    "calibrated 95% CI"]
CONFUSION_CORNER = "person ↓ judge →"
# What the two means are, in plain words, above the tables of summary.md and report.html.
MEANS_EXPLAINED = (
    "The judge mean is the average of the judge's own scores: it carries whatever bias the judge has. The calibrated "
    "mean estimates the average grade the person would give, from the grades corrected by the judge's scores of the "
    "answers nobody graded; the gate judges a judge metric on it where report.gate.calibrated is on and both runs "
    "have min_grades grades in the cell (the comparison's notes name those cells), and on the judge's raw scores "
    "everywhere else.")


def judge_notes(section: Mapping[str, Any]) -> list[str]:
    """The sentences above the tables: where the grades are (or that there are none yet), then each judge's notes
    (too few grades, undefined statistics) and whether the spot-check ran."""
    notes = []
    if section.get("note"):
        notes.append(f"{section['note']} (grades go to {section['grades_file']})")
    else:
        notes.append(f"{section['grades']} grade(s) in {section['grades_file']}; a judge is trusted at quadratic "
                     f"kappa ≥ {section['trust_kappa']:g} over at least {section['min_grades']} graded answers.")
    notes.append(MEANS_EXPLAINED)
    for judge, j in section["judges"].items():
        notes += [f"{judge}: {note}" for note in ((j["agreement"] or {}).get("notes") or [])]
    if not any(j["self_consistency"] for j in section["judges"].values()):
        notes.append(NO_SPOT_CHECK)
    return notes


def agreement_rows(section: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for judge, j in section["judges"].items():
        a = j["agreement"]
        if a is None:
            rows.append([judge, "0", "—", "—", "—", "—", "—", j["trust"]])
            continue
        rows.append([judge, str(a["n"]), _share(a["exact"]), _share(a["within_one"]), _number(a["kappa"]),
                     _number(a["spearman"]), _number(a["mean_bias"], signed=True), j["trust"]])
    return rows


def self_consistency_rows(section: Mapping[str, Any]) -> list[list[str]]:
    return [[judge, str(s["pairs"]), _share(s["exact_agreement"]), _number(s["mean_abs_diff"])]
            for judge, j in section["judges"].items() if (s := j["self_consistency"])]


def estimate_rows(section: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for judge, j in section["judges"].items():
        for c in j["cells"]:
            calibrated = c["calibrated"] is not None
            # Fewer grades than min_grades say little, as they do for the agreement: flagged, and left out by the gate.
            few = f" (< {section['min_grades']}: not used by the gate)" \
                if 0 < c["graded"] < section["min_grades"] else ""
            # Each interval with the n it rests on beside it: a reader copying one figure takes its n along.
            rows.append([judge, c["retriever"], str(c["k"]), str(c["answers"]), _number(c["judge_mean"]),
                         f"{_interval(c['judge_low'], c['judge_high'])}, n {c['answers']} answers",
                         f"{c['graded']}{few}", _number(c["calibrated"]) if calibrated else "—",
                         f"{_interval(c['calibrated_low'], c['calibrated_high'])}, n {c['graded']} grades of "
                         f"{c['answers']} answers" if calibrated else "—"])
    return rows


def confusion_tables(section: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(judge, headers, rows) of each judge with grades: rows the person's grade, columns the judge's score."""
    return [(judge, [CONFUSION_CORNER, *map(str, SCALE)],
             [[str(grade), *map(str, counts)] for grade, counts in zip(SCALE, j["agreement"]["confusion"])])
            for judge, j in section["judges"].items() if j["agreement"]]


def judges_markdown(section: Mapping[str, Any], level: str) -> str:
    """The whole section as Markdown under a `level` heading (summary.md, the asset's metadata)."""
    parts = [f"{level} {TITLE}", "\n".join(f"- {note}" for note in judge_notes(section)),
             f"{level}# Agreement with the person's grades", markdown_table(AGREEMENT_HEADERS, agreement_rows(section))]
    spot = self_consistency_rows(section)
    if spot:
        parts += [f"{level}# Agreement with itself (spot-check)", markdown_table(SELF_HEADERS, spot)]
    parts += [f"{level}# Judge means, raw and calibrated by the grades",
              markdown_table(ESTIMATE_HEADERS, estimate_rows(section))]
    for judge, headers, rows in confusion_tables(section):
        parts += [f"{level}# Confusion of {judge}", markdown_table(headers, rows)]
    return "\n\n".join(parts)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"

