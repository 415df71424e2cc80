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

from collections.abc import Iterable

import pandas as pd

from rag_eval_assets.generation.judges import NOT_JUDGED_ABSTAINED, NOT_JUDGED_ANSWER_ERROR
from rag_eval_assets.metrics.ragas_context import RAGAS_METRICS, was_computed

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

