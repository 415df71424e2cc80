"""How the calls behind the answer metrics went, per retriever and k: the answerer's, each judge's and ragas'.

An outage must be visible: a metric whose every call failed has no value, and says so ("not computed: 14 of 14
calls failed (first error)") instead of silently disappearing; a cell whose calls failed more often than
`llm.max_error_rate` fails the blocking `call_health` check, and the gate does not compare that metric there.

One row per (retriever, k, stage, metric):
- stage `answer`, metric `answer`: answers (calls), answer errors, abstentions;
- stage `judge`, metric groundedness / correctness: judgments asked (first replicate), failed, and judged; answers
  that abstained or failed are never sent to a judge (counted as abstained, not as calls);
- stage `ragas`, metric context_precision / context_recall: rows computed and failed; rows ragas was never asked
  about (no retrieved contexts, no reference) are not calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag_eval_assets.generation.judges import NOT_JUDGED_ABSTAINED, NOT_JUDGED_ANSWER_ERROR
from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.metrics.ragas_context import RAGAS_METRICS, was_computed
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.retrieval.registry import Variant, kind_of
from rag_eval_assets.retrieval.sut_url import shown_url

CALL_HEALTH_COLUMNS = ("retriever", "k", "stage", "metric", "calls", "errors", "abstained", "judged", "error_rate",
                       "first_error")


def call_health(answers: Iterable[pd.DataFrame], judged: Iterable[pd.DataFrame], per_query: pd.DataFrame) -> pd.DataFrame:
    """The health table from the answers tables, the judged_answers tables and answer_metrics_per_query (its
    `error` column holds each failed ragas row's error text)."""
    rows = []
    for table in answers:
        for (retriever, k), g in table.groupby(["retriever", "k"], sort=True):
            rows.append(_row(retriever, k, "answer", "answer", g["error"], abstained=int(g["abstained"].sum())))
    for table in judged:
        main = table[table["replicate"] == 0]
        for (retriever, k, judge), g in main.groupby(["retriever", "k", "judge"], sort=True):
            rows.append(_row(retriever, k, "judge", judge, g.loc[g["error"].map(was_a_call), "error"],
                             abstained=int((g["error"] == NOT_JUDGED_ABSTAINED).sum())))
    ragas = per_query[per_query["metric"].isin(RAGAS_METRICS)]
    # A mask, even of no rows (a service-only run has no ragas row): an empty object Series would select columns.
    ragas = ragas[ragas["error"].map(was_a_call).astype(bool)]
    for (retriever, k, metric), g in ragas.groupby(["retriever", "k", "metric"], sort=True):
        rows.append(_row(retriever, k, "ragas", metric, g["error"]))
    return pd.DataFrame(rows, columns=list(CALL_HEALTH_COLUMNS)).astype(
        {"k": "int64", "calls": "int64", "errors": "int64", "abstained": "int64", "judged": "int64",
         "error_rate": "float64"})


def _row(retriever: str, k: int, stage: str, metric: str, errors: pd.Series, abstained: int = 0) -> tuple:
    failed = errors[errors.notna() & (errors.astype(str) != "")]
    calls = len(errors)
    first = str(failed.iloc[0]).strip().splitlines()[0][:300] if len(failed) else None
    return (str(retriever), int(k), stage, metric, calls, len(failed), abstained, calls - len(failed),
            len(failed) / calls if calls else 0.0, first)


def was_a_call(error: object) -> bool:
    """False for the error text of a row no call was made for: an answer not sent to a judge, a ragas row with a
    missing input."""
    return error not in (NOT_JUDGED_ABSTAINED, NOT_JUDGED_ANSWER_ERROR) and was_computed(error)


def not_computed_note(row: pd.Series | dict) -> str:
    return f"not computed: {row['errors']} of {row['calls']} calls failed ({row['first_error']})"


@dataclass(frozen=True)
class CallHealthOutcome:
    """The outcome of the blocking `call_health` check (defs/report/assets.py makes it an AssetCheckResult)."""

    passed: bool
    description: str
    metadata: dict[str, Any]


def endpoint(row: Any, variants: Mapping[str, Variant], answerer: str,
             llm_for: Callable[[str], LLMSettings | None]) -> tuple[str, str] | None:
    """Who a health row's calls went to and its URL (credentials redacted); None when no call left the process
    (an extractive answerer). `llm_for(role)`: the endpoint of each role (Settings.llm_for)."""
    if row.stage == "answer":
        variant = variants.get(row.retriever)
        if variant is not None and kind_of(variant).own_answers:
            return "the service under test", shown_url(variant.params.base_url, variant.params.path)
        llm = llm_for("answerer")
        if answerer == "llm" and llm is not None:
            return "the answerer LLM", redact_url(llm.base_url)
        return None
    who, llm = {"judge": ("the judge", llm_for("judge")), "ragas": ("the ragas LLM", llm_for("ragas"))}[row.stage]
    return (who, redact_url(llm.base_url)) if llm is not None else None


def check_call_health(health: pd.DataFrame, limit: float,
                      endpoint_of: Callable[[Any], tuple[str, str] | None]) -> CallHealthOutcome:
    """Fails when a cell's calls failed more often than `limit` (llm.max_error_rate); the description names the
    endpoint (`endpoint_of` a health row, without credentials) and the first error of up to three such cells."""
    rows = [(row, where) for row in health.itertuples(index=False) if (where := endpoint_of(row)) is not None]
    if not rows:
        return CallHealthOutcome(True, "nothing to check: no LLM or service call was made",
                                 {"status": "nothing to check"})
    bad = [(row, where) for row, where in rows if row.error_rate > limit]
    calls = sum(row.calls for row, _ in rows)
    errors = sum(row.errors for row, _ in rows)
    metadata = {"calls": calls, "errors": errors, "max_error_rate": limit}
    if not bad:
        return CallHealthOutcome(True, f"{errors} of {calls} calls failed, within {limit:.0%} per cell", metadata)
    shown = "; ".join(
        f"{row.retriever}@{row.k} {row.stage} {row.metric}: {row.errors} of {row.calls} calls to {who} at {url} "
        f"failed ({row.error_rate:.0%} > {limit:.0%}); first error: {row.first_error}"
        for row, (who, url) in bad[:3]) + (f"; and {len(bad) - 3} more cells" if len(bad) > 3 else "")
    return CallHealthOutcome(False, shown[:2000], {**metadata, "failing_cells": len(bad)})


def outage_notes(per_query: pd.DataFrame) -> list[tuple[str, int, str, str]]:
    """(retriever, k, metric, note) of every answer metric whose every row failed: it says why instead of
    disappearing ("not computed: 14 of 14 calls failed (first error)", or that no row was sent)."""
    notes = []
    for (r, k, m), cell in per_query.groupby(["retriever", "k", "metric"], sort=True):
        if cell["error"].isna().all() or cell["value"].notna().any():
            continue
        calls = cell[cell["error"].map(was_a_call)]
        failed = calls[calls["error"].notna()]
        note = not_computed_note({"errors": len(failed), "calls": len(calls),
                                  "first_error": str(failed["error"].iloc[0]).splitlines()[0][:300]}) \
            if len(failed) else f"not computed: no row was sent ({', '.join(sorted(set(cell['error'].dropna())))})"
        notes.append((r, k, m, note))
    return notes
