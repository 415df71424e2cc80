"""The ranking of a run's retrievers as people read a sweep: per k, one table of the retrievers by metric (the gate
metric first, then the run's other metrics at that k, each mean with its 95% interval) with the best and the
confidence set of the best marked; the same rows for summary.md, report.html and the Dagster metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from rag_eval_assets.reports.markdown import cell_text, markdown_table
from rag_eval_assets.verdict.ranking import TIE, KRanking
from rag_eval_assets.verdict.text import p_text

BEST, IN_SET, OUT = "best", "may be best", ""
BEST_COLUMNS = ("k", "metric", "best", "value", "set_size", "may_be_best")


@dataclass(frozen=True)
class VariantRow:
    retriever: str
    mark: str  # BEST, IN_SET or OUT
    cells: tuple[str, ...]  # under variant_headers


def variant_headers(ranking: KRanking, aggregate: pd.DataFrame) -> list[str]:
    return ["rank", "retriever", "best set", "p (best)", f"{ranking.metric} (gate)", "95% CI", "n",
            *_other_metrics(ranking, aggregate)]


def variant_rows(ranking: KRanking, aggregate: pd.DataFrame) -> list[VariantRow]:
    """One row per retriever at the ranking's k, best first: its mark, the gate metric's mean over the questions
    every retriever scored with interval and n, its p-value of being the best, then each other metric of the run
    at that k over the questions where it is defined, "mean [low, high]"."""
    others = _other_metrics(ranking, aggregate)
    rows_at_k = aggregate[(aggregate["slice"] == "all") & (aggregate["k"] == ranking.k)]
    at_k = {(r.retriever, r.metric): r for r in rows_at_k.itertuples(index=False)}
    top = ranking.retrievers[0].value
    rows = []
    for rank, r in enumerate(ranking.retrievers, 1):
        mark = BEST if abs(r.value - top) <= TIE else IN_SET if r.may_be_best else OUT
        cells = [str(rank), r.retriever, mark, p_text(r.p_best), f"{r.value:.4f}", _interval(r.ci_low, r.ci_high),
                 str(r.n)]
        for metric in others:
            found = at_k.get((r.retriever, metric))
            cells.append("—" if found is None
                         else f"{cell_text(found.value)} {_interval(found.ci_low, found.ci_high, 3)}")
        rows.append(VariantRow(r.retriever, mark, tuple(cells)))
    return rows


def ranking_markdown(rankings: Sequence[KRanking], aggregate: pd.DataFrame, level: str = "###") -> str:
    """The ranking's sentences, then per k the table of variant_rows under a heading of `level`."""
    if not rankings:
        return "_not computed: no metric has a value for every retriever_"
    parts = ["\n".join(f"- {r.sentence()}" for r in rankings)]
    for ranking in rankings:
        parts += [f"{level} k={ranking.k}", markdown_table(variant_headers(ranking, aggregate),
                                                          [row.cells for row in variant_rows(ranking, aggregate)])]
    return "\n\n".join(parts)


def ranking_headline(rankings: Sequence[KRanking]) -> dict[str, float]:
    """Each ranked retriever's value per k, named "<metric>@<k> <retriever>" (e.g. "ndcg@10 bm25")."""
    return {f"{r.metric.removesuffix('@k')}@{r.k} {s.retriever}": s.value for r in rankings for s in r.retrievers}


def best_records(rankings: Sequence[KRanking]) -> list[dict[str, object]]:
    """Per k (BEST_COLUMNS): the gate metric, the best retriever (the tied ones joined), its value (4 decimals, as
    people read it; the ranking's floats keep every digit), and the confidence set of the best, its size and its
    members in rank order."""
    return [{"k": r.k, "metric": r.metric, "best": ", ".join(r.tied or (r.retrievers[0].retriever,)),
             "value": round(r.retrievers[0].value, 4), "set_size": len(r.best_set), "may_be_best": ", ".join(r.best_set)}
            for r in rankings]


def _other_metrics(ranking: KRanking, aggregate: pd.DataFrame) -> list[str]:
    rows = aggregate[(aggregate["slice"] == "all") & (aggregate["k"] == ranking.k)]
    return [m for m in pd.unique(rows["metric"]) if m != ranking.metric]


def _interval(low: float, high: float, digits: int = 4) -> str:
    return f"[{cell_text(float(low), digits)}, {cell_text(float(high), digits)}]"
