"""What a pipeline run writes into its run directory: the results rows, the metrics document (run store format) and
the health of the calls behind the answer metrics, from the tables over the retriever x k grid (the health decides
the blocking call_health check before the directory is written); its config.json is configured_run.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval_assets.generation.settings import JudgeSettings
from rag_eval_assets.judging.grades import load_grades
from rag_eval_assets.judging.summary import judges_summary
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS
from rag_eval_assets.metrics.call_health import call_health
from rag_eval_assets.metrics.ranked_lists import relevance_judgements
from rag_eval_assets.runs.contents import judged_table_frame, metrics_document, results_rows


@dataclass(frozen=True)
class GridContents:
    rows: Iterator[dict[str, Any]]  # results.jsonl, made row by row as write_run writes it (read once)
    metrics: dict[str, Any]  # metrics.json
    health: pd.DataFrame  # metrics/call_health.py, also in `metrics`


def grid_contents(
    evalset: pd.DataFrame,
    chunks: pd.DataFrame,
    retrieval_results: Iterable[pd.DataFrame],
    retrieval_metrics_per_query: pd.DataFrame,
    retrieval_metrics: pd.DataFrame,
    answers: Iterable[pd.DataFrame],
    judged_answers: Iterable[pd.DataFrame],
    answer_metrics_per_query: pd.DataFrame,
    answer_metrics: pd.DataFrame,
    unresolved_gold: Mapping[str, Any] | None,
    grades_file: Path,
    judge: JudgeSettings,
    gold_of: Callable[[str], pd.DataFrame],
    level: str,
) -> GridContents:
    """From the partitions of retrieval_results, answers and judged_answers and the metric tables: answer metric
    rows with a `note` are what was not computed (and why), the others join the aggregate; the operational figures
    are the answers' error count, token totals and cost. A judged run's judges are summed up against the person's
    grades in `grades_file` (judging/grades.py), if it exists, under `judge`'s trust settings. Each row carries its
    question's relevant items at the retrieval `level` (from `gold_of(retriever)`, the gold labels of the chunking
    its retriever searched, as the metrics judge them), so that a comparison can mark them in what each run
    retrieved. `chunks` holds the chunks of every chunking the retrievers searched."""
    answers = list(answers)
    judged = [t for t in judged_answers if len(t)]
    answers_table = pd.concat(answers, ignore_index=True)
    rows = with_gold(results_rows(
        evalset,
        pd.concat(list(retrieval_results), ignore_index=True),
        chunks,
        pd.concat([retrieval_metrics_per_query, answer_metrics_per_query], ignore_index=True),
        answers_table,
        pd.concat(judged, ignore_index=True) if judged else None,
    ), gold_of, level)
    noted = answer_metrics["note"].notna()
    aggregate = pd.concat([retrieval_metrics[list(AGGREGATE_COLUMNS)],
                           answer_metrics.loc[~noted, list(AGGREGATE_COLUMNS)]], ignore_index=True)
    not_computed = answer_metrics.loc[noted, ["retriever", "k", "metric", "note"]].rename(columns={"note": "reason"})
    operational = {
        "answer_errors": int(answers_table["error"].notna().sum()),
        "prompt_tokens": int(answers_table["prompt_tokens"].fillna(0).sum()),
        "completion_tokens": int(answers_table["completion_tokens"].fillna(0).sum()),
        "cost_usd": float(answers_table["cost_usd"].fillna(0).sum()),
    }
    health = call_health(answers, judged, answer_metrics_per_query)
    judges = None
    if judged:
        grades = load_grades(grades_file) if grades_file.exists() else None
        # From the table, not from `rows`: they are made once, as write_run writes them.
        judges = judges_summary(judged_table_frame(pd.concat(judged, ignore_index=True)), grades, grades_file, trust_kappa=judge.trust_kappa,
                                min_grades=judge.min_grades).as_json()
    document = metrics_document(aggregate, not_computed, operational, health, unresolved_gold, judges)
    return GridContents(rows, document, health)


def with_gold(rows: Iterator[dict[str, Any]], gold_of: Callable[[str], pd.DataFrame],
              level: str) -> Iterator[dict[str, Any]]:
    """Each row with `gold`: {"level": level, "items": [{"id": chunk or document id, "grade": ...}]}, from the gold
    labels of its retriever (`gold_of(retriever)`)."""
    items_of: dict[int, dict[str, list[dict[str, Any]]]] = {}  # by gold table: retrievers of a chunking share it

    def items(gold_labels: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
        if id(gold_labels) not in items_of:
            judged = relevance_judgements(gold_labels, level)
            by_query = items_of[id(gold_labels)] = {}
            for q, item, grade in zip(judged["query_id"], judged["item"], judged["grade"]):
                by_query.setdefault(str(q), []).append({"id": str(item), "grade": int(grade)})
        return items_of[id(gold_labels)]

    for row in rows:
        yield {**row, "gold": {"level": level,
                               "items": items(gold_of(str(row["retriever"]))).get(str(row["query_id"]), [])}}
