"""Which retriever is best: per k, the retrievers of one run ranked on the gate metric over the questions every one
of them scored, each with its 95% interval, and the confidence set of the best at the gate's alpha (best_set.py):
the retrievers no other is significantly better than."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.metrics.stats import bootstrap_ci_columns
from rag_eval_assets.runs.store import Run
from rag_eval_assets.verdict.best_set import best_set
from rag_eval_assets.verdict.gate import choose_metric, per_question_name, weighted_terms
from rag_eval_assets.verdict.judged import graded_frame, judge_trust
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets.verdict.text import p_text

# Means computed over the same questions in another order differ in the last bits: closer than this is a tie.
TIE = 1e-9
# Names a sentence lists (of a tie, of the set), the rest counted; the tables mark every member of the set.
NAMED = 8


@dataclass(frozen=True)
class RankedRetriever:
    retriever: str
    value: float  # (weighted) mean over the questions every retriever of the ranking scored
    ci_low: float
    ci_high: float
    n: int
    p_best: float  # max-T p-value of "no other retriever is better than this one" (best_set.py)
    may_be_best: bool  # in the confidence set of the best


@dataclass(frozen=True)
class KRanking:
    k: int
    metric: str
    retrievers: tuple[RankedRetriever, ...]  # best first
    alpha: float  # the level of the confidence set

    @property
    def best_set(self) -> tuple[str, ...]:
        """The retrievers that may be the best, in rank order."""
        return tuple(r.retriever for r in self.retrievers if r.may_be_best)

    @property
    def tied(self) -> tuple[str, ...]:
        """The retrievers that share the leader's value (two or more: a tie), in name order."""
        best = self.retrievers[0].value
        names = tuple(r.retriever for r in self.retrievers if abs(r.value - best) <= TIE)
        return names if len(names) > 1 else ()

    def sentence(self) -> str:
        """e.g. "k=10: hybrid best, ndcg@k 0.716 vs bm25 0.677; the only one that may be the best at alpha 0.05
        (others p <= 0.012)", "k=1: bm25_k1-1.0 best, ndcg@k 0.970 vs bm25_k1-0.9 0.939; 2 variants may be the best
        at alpha 0.05: bm25_k1-1.0, bm25_k1-0.9", or "k=5: dense and hybrid tie at 0.750 (ndcg@k); no other may be
        the best at alpha 0.05 (others p <= 0.031)"."""
        leader = self.retrievers[0]
        if len(self.retrievers) == 1:
            return f"k={self.k}: {leader.retriever} alone, {self.metric} {leader.value:.3f}"
        if self.tied:
            head = f"k={self.k}: {_listed(self.tied, ' and ')} tie at {leader.value:.3f} ({self.metric})"
        else:
            runner = self.retrievers[1]
            head = (f"k={self.k}: {leader.retriever} best, {self.metric} {leader.value:.3f} vs {runner.retriever} "
                    f"{runner.value:.3f}")
        members, at = self.best_set, f"at alpha {self.alpha:g}"
        others = [r for r in self.retrievers if not r.may_be_best]
        if set(members) == set(self.tied or (leader.retriever,)):
            if not others:  # every retriever tied at the top
                return head
            what = "the only one that may be the best" if len(members) == 1 else "no other may be the best"
            return f"{head}; {what} {at} (others p {_at_most(max(r.p_best for r in others))})"
        return f"{head}; {len(members)} variants may be the best {at}{'' if others else ' (all)'}: {_listed(members)}"


def rank_retrievers(run: Run, gate: GateSettings = GateSettings(), *, grading: Grading | None = None,
                    n_perm: int = 10000) -> list[KRanking]:
    """One KRanking per k at which some metric has a value for every retriever of the run on some question. A judge
    metric whose judge the person's grades do not trust (verdict/judged.py) is passed over, as the gate passes it
    over."""
    untrusted = set()
    if grading is not None and grading.grades:
        untrusted = {name for name, j in judge_trust(graded_frame(run, grading), grading).items() if not j.trusted}
    per_query = run.per_query_frame()
    per_query = per_query[per_query["value"].notna()]
    weights = {row["query_id"]: float(row.get("weight") or 1.0) for row in run.results}
    rankings = []
    for k, at_k in per_query.groupby("k", sort=True):
        shared = set.intersection(*(set(g["metric"]) for _, g in at_k.groupby("retriever")))
        metric = choose_metric(shared, gate, untrusted)
        if metric is None:
            continue
        rows = at_k[at_k["metric"] == per_question_name(metric)]
        # Every retriever on the same questions: a paired comparison, and no retriever ahead by missing hard ones.
        wide = rows.pivot(index="query_id", columns="retriever", values="value").dropna()
        if wide.empty:
            continue
        w = np.array([weights.get(q, 1.0) for q in wide.index])
        terms = weighted_terms(wide.to_numpy(dtype=float), w[:, None])
        found = best_set(terms, alpha=gate.alpha, n_perm=n_perm)
        low, high = bootstrap_ci_columns(terms)
        ranked = sorted(
            (RankedRetriever(str(name), float(terms[:, i].mean()), float(low[i]), float(high[i]), len(wide),
                             float(found.p_values[i]), bool(found.members[i]))
             for i, name in enumerate(wide.columns)),
            key=lambda r: (-r.value, r.retriever))
        rankings.append(KRanking(int(k), metric, tuple(ranked), gate.alpha))
    return rankings


def _listed(names: tuple[str, ...], last: str = ", ") -> str:
    """At most NAMED names, the rest counted: "a, b and c", "a, b, c", "a, b, ... h and 4 more"."""
    if len(names) > NAMED:
        return ", ".join(names[:NAMED]) + f" and {len(names) - NAMED} more"
    return ", ".join(names[:-1]) + last + names[-1] if len(names) > 1 else names[0]


def _at_most(p: float) -> str:
    text = p_text(p)
    return text if text.startswith("<") else f"<= {text}"
