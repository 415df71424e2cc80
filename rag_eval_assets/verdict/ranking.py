"""Which retriever is best: per k, the retrievers of one run ranked on the gate metric, with 95% intervals, and a
paired test of the leader against the runner-up over the questions both scored."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.metrics.stats import bootstrap_ci
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.corrections import corrected
from rag_eval_assets.verdict.gate import choose_metric, per_question_name, weighted_terms
from rag_eval_assets.verdict.judged import graded_frame, judge_trust
from rag_eval_assets.verdict.paired import paired_test
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets.verdict.text import interval_text, signed

# Means computed over the same questions in another order differ in the last bits: closer than this is a tie.
TIE = 1e-9


@dataclass(frozen=True)
class RankedRetriever:
    retriever: str
    value: float  # (weighted) mean over the questions where the metric is defined
    ci_low: float
    ci_high: float
    n: int


@dataclass(frozen=True)
class KRanking:
    k: int
    metric: str
    retrievers: tuple[RankedRetriever, ...]  # best first
    margin: float | None  # leader minus runner-up over the questions both scored; None with one retriever
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None  # corrected across the k values, as the gate corrects across cells
    significant: bool

    @property
    def tied(self) -> tuple[str, ...]:
        """The retrievers that share the leader's value (two or more: a tie), in name order."""
        best = self.retrievers[0].value
        names = tuple(r.retriever for r in self.retrievers if abs(r.value - best) <= TIE)
        return names if len(names) > 1 else ()

    def sentence(self) -> str:
        """e.g. "k=10: hybrid leads, ndcg@k 0.716 vs bm25 0.677, +0.039 [+0.021, +0.058], p < 0.001", or "k=10:
        dense and hybrid tie at 0.750 (ndcg@k)"; the corrected p-value, which decides "leads", follows as p_adj when
        the correction changed it."""
        leader = self.retrievers[0]
        if len(self.retrievers) == 1:
            return f"k={self.k}: {leader.retriever} alone, {self.metric} {leader.value:.3f}"
        if self.tied:
            names = ", ".join(self.tied[:-1]) + f" and {self.tied[-1]}"
            return f"k={self.k}: {names} tie at {leader.value:.3f} ({self.metric})"
        runner = self.retrievers[1]
        verdict = "leads" if self.significant else "leads, not significantly"
        return (
            f"k={self.k}: {leader.retriever} {verdict}, {self.metric} {leader.value:.3f} vs {runner.retriever} "
            f"{runner.value:.3f}, {signed(self.margin, 3)} {interval_text(self.ci_low, self.ci_high, 3)}, "
            f"p {_p(self.p_value)}" + (f", p_adj {_p(self.p_adjusted)}" if self.p_adjusted != self.p_value else "")
        )


def rank_retrievers(run: Run, gate: GateSettings = GateSettings(), *, grading: Grading | None = None,
                    n_perm: int = 10000) -> list[KRanking]:
    """One KRanking per k at which some metric has a value for every retriever of the run. A judge metric whose
    judge the person's grades do not trust (verdict/judged.py) is passed over, as the gate passes it over."""
    untrusted = set()
    if grading is not None and grading.grades:
        untrusted = {name for name, j in judge_trust(graded_frame(run, grading), grading).items() if not j.trusted}
    per_query = run.per_query_frame()
    per_query = per_query[per_query["value"].notna()]
    weights = {row["query_id"]: float(row.get("weight") or 1.0) for row in run.results}
    rankings, margins = [], []
    for k, at_k in per_query.groupby("k", sort=True):
        retrievers = sorted(at_k["retriever"].unique())
        shared = set.intersection(*(set(g["metric"]) for _, g in at_k.groupby("retriever")))
        metric = choose_metric(shared, gate, untrusted)
        if metric is None:
            continue
        rows = at_k[at_k["metric"] == per_question_name(metric)]
        wide = rows.pivot(index="query_id", columns="retriever", values="value")
        ranked = sorted((_summary(r, wide[r].dropna(), weights) for r in retrievers), key=lambda s: (-s.value, s.retriever))
        margin = ci_low = ci_high = p_value = None
        diffs = pd.Series(dtype=float)
        if len(ranked) > 1:
            pair = wide[[ranked[0].retriever, ranked[1].retriever]].dropna()
            w = np.array([weights.get(q, 1.0) for q in pair.index])
            diffs = weighted_terms(pair.iloc[:, 0].to_numpy() - pair.iloc[:, 1].to_numpy(), w)
            test = paired_test(np.zeros(len(diffs)), diffs, n_perm=n_perm, alpha=gate.alpha)
            margin, ci_low, ci_high, p_value = test.delta, test.ci_low, test.ci_high, test.p_value
            diffs = pd.Series(diffs, index=pair.index)
        rankings.append(KRanking(int(k), metric, tuple(ranked), margin, ci_low, ci_high, p_value, None, False))
        margins.append(diffs)
    # corrected across the k values, as the gate corrects across cells
    adjusted = corrected([r.p_value for r in rankings], margins, gate.correction, n_perm=n_perm, seed=0)
    return [
        KRanking(r.k, r.metric, r.retrievers, r.margin, r.ci_low, r.ci_high, r.p_value, p,
                 p is not None and p < gate.alpha)
        for r, p in zip(rankings, adjusted)
    ]


def ranking_frame(rankings: list[KRanking]) -> pd.DataFrame:
    """One row per (k, retriever): rank, metric, value, ci_low, ci_high, n."""
    return pd.DataFrame(
        [(r.k, i + 1, s.retriever, r.metric, s.value, s.ci_low, s.ci_high, s.n)
         for r in rankings for i, s in enumerate(r.retrievers)],
        columns=["k", "rank", "retriever", "metric", "value", "ci_low", "ci_high", "n"],
    )


def _summary(retriever: str, values: pd.Series, weights: dict[str, float]) -> RankedRetriever:
    w = np.array([weights.get(q, 1.0) for q in values.index])
    scaled = weighted_terms(values.to_numpy(dtype=float), w)
    low, high = bootstrap_ci(scaled)
    return RankedRetriever(retriever, float(scaled.mean()), low, high, len(values))


def _p(value: float | None) -> str:
    return "—" if value is None else "< 0.001" if value < 0.001 else f"= {value:.3f}"
