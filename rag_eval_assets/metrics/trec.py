"""TREC run and qrels files, so any trec_eval-compatible tool scores exactly what retrieval_metrics scores.

The run holds the ranked lists of `retrieval.ranked_lists` (rank order, each id once). trec_eval ignores the rank
column and orders by score descending, breaking ties by id descending, which would reorder a retriever's tied
results; so the score column is rank-derived and strictly decreasing: n, n-1, ..., 1 for a query with n entries.
The retriever's own scores stay in the results table. Ids are written with '%' and whitespace percent-encoded
(UTF-8), because fields are whitespace-separated; urllib.parse.unquote restores them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from rag_eval_assets.errors import InputError
from rag_eval_assets.metrics.ranked_lists import LEVELS, ranked_lists, relevance_judgements
from rag_eval_assets.metrics.retrieval_inputs import GOLD_FIELDS, RESULT_FIELDS, frame_problems

_UNSAFE = re.compile(r"[%\s]")


def write_trec_run(results: pd.DataFrame, path: str | Path, run_name: str, level: str = "chunk") -> None:
    """Write one retriever's results as `qid Q0 docid rank score run_name` lines, queries in sorted order."""
    _check_level(level)
    if not run_name or _UNSAFE.search(run_name):
        raise ValueError(f"run_name must be non-empty without whitespace or '%', got {run_name!r}")
    problems = frame_problems(results, "results", RESULT_FIELDS)
    if problems:
        raise InputError(problems)
    if results["retriever"].nunique() > 1:
        raise ValueError(f"a run file holds one retriever, got {sorted(results['retriever'].unique())}")
    ranked = ranked_lists(results, level)
    length = ranked.groupby("query_id")["position"].transform("max")
    lines = [
        f"{trec_id(q)} Q0 {trec_id(i)} {p} {s} {run_name}\n"
        for q, i, p, s in zip(ranked["query_id"], ranked["item"], ranked["position"], length - ranked["position"] + 1)
    ]
    Path(path).write_text("".join(lines), encoding="utf-8")


def write_trec_qrels(gold: pd.DataFrame, path: str | Path, level: str = "chunk") -> None:
    """Write `qid 0 docid grade` lines: the relevance judgements retrieval_metrics uses at `level`."""
    _check_level(level)
    problems = frame_problems(gold, "gold", GOLD_FIELDS)
    if problems:
        raise InputError(problems)
    judged = relevance_judgements(gold, level)
    lines = [
        f"{trec_id(q)} 0 {trec_id(i)} {g}\n" for q, i, g in zip(judged["query_id"], judged["item"], judged["grade"])
    ]
    Path(path).write_text("".join(lines), encoding="utf-8")


def trec_id(value: str) -> str:
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), value)


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
