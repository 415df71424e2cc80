"""What a run directory holds, made from the pipeline's tables (runs/store.py has the layout): the results rows
(results.jsonl), the metrics document (metrics.json) and config.json's version tuple, all as plain JSON values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.generation.judges import judge_input_sha256
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS
from rag_eval_assets.runs.versions import VersionTuple

JUDGMENT_FRAME_COLUMNS = ("query_id", "retriever", "k", "judge", "score", "replicate", "judge_input_sha256")
VERSION_TUPLE_KEY = "version_tuple"
UNRESOLVED_GOLD = "unresolved_gold"  # metrics.json: gold labels that resolved to nothing, when some did not
JUDGES = "judges"  # metrics.json: agreement with the grades, self-consistency and calibrated means, when judged
_ANSWER_FIELDS = (
    "answerer",
    "abstained",
    "abstained_inferred",
    "abstain_reason",
    "citations",
    "model",
    "prompt_sha256",
    "prompt_tokens",
    "completion_tokens",
    "error",
)
_JSON_TEXT_FIELDS = ("citations", "supported_claims", "unsupported_claims", "judge_input")


def judged_table_frame(judged: pd.DataFrame) -> pd.DataFrame:
    """judgment_frame of a judged_answers table, the digests as its results rows will carry them: for what is
    summed up before (and apart from) the rows, which are made once, as they are written."""
    return judgment_frame({"query_id": j["query_id"], "retriever": j["retriever"], "k": int(j["k"]),
                           "judgments": [_judgment_record(j)]} for j in judged.to_dict("records"))


def judgment_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Every judgement of results rows (results_rows, or results.jsonl read back): JUDGMENT_FRAME_COLUMNS."""
    records = [
        (row["query_id"], row["retriever"], row["k"], j.get("judge"),
         np.nan if j.get("score") is None else float(j["score"]), int(j.get("replicate") or 0),
         j.get("judge_input_sha256"))
        for row in results
        for j in row.get("judgments") or []
    ]
    return pd.DataFrame(records, columns=list(JUDGMENT_FRAME_COLUMNS))


def run_config(versions: VersionTuple, **extra: Any) -> dict[str, Any]:
    """The config.json of a run: the version tuple, its config_hash and any further settings given."""
    return {VERSION_TUPLE_KEY: versions.as_dict(), "config_hash": versions.config_hash, **extra}


def metrics_document(
    aggregate: pd.DataFrame,
    not_computed: pd.DataFrame | None = None,
    operational: Mapping[str, Any] | None = None,
    call_health: pd.DataFrame | None = None,
    unresolved_gold: Mapping[str, Any] | None = None,
    judges: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `metrics` of write_run from the aggregate table (metrics/aggregate.py columns; metric "weighted_score"
    rows, when present, are what the comparison gate reads), the (metric, reason) rows of metrics not computed (with
    retriever and k where the reason is one cell's), free-form operational figures (error counts, token totals,
    ...), the health of the calls behind the answer metrics (metrics/call_health.py), which the gate reads, and the
    gold labels that resolved to nothing (corpus/gold.py GoldResolution.unresolved_document) and what the judges
    are worth (judging/summary.py JudgesSummary.as_json), when the run was judged."""
    missing = [c for c in AGGREGATE_COLUMNS if c not in aggregate.columns]
    if missing:
        raise InputError([InputProblem("aggregate", None, c, "missing column") for c in missing])
    document: dict[str, Any] = {"aggregate": jsonable(aggregate[list(AGGREGATE_COLUMNS)].to_dict("records"))}
    if not_computed is not None:
        document["not_computed"] = jsonable(_reasons(not_computed))
    if operational:
        document["operational"] = jsonable(dict(operational))
    if call_health is not None and len(call_health):
        document["call_health"] = jsonable(call_health.to_dict("records"))
    if unresolved_gold and unresolved_gold["labels"]:
        document[UNRESOLVED_GOLD] = jsonable(dict(unresolved_gold))
    if judges is not None:
        document[JUDGES] = jsonable(dict(judges))
    return document


def _reasons(not_computed: pd.DataFrame) -> list[dict[str, Any]]:
    """(metric, reason) records; a reason that only some (retriever, k) cells have keeps its cells, one record each."""
    if "retriever" not in not_computed.columns:
        return not_computed[["metric", "reason"]].drop_duplicates().to_dict("records")
    cells = set(zip(not_computed["retriever"], not_computed["k"]))
    records = []
    for (metric, reason), group in not_computed.groupby(["metric", "reason"], sort=False):
        mine = list(dict.fromkeys(zip(group["retriever"], group["k"])))
        if set(mine) == cells:
            records.append({"metric": metric, "reason": reason})
        else:
            records += [{"retriever": r, "k": k, "metric": metric, "reason": reason} for r, k in mine]
    return records


def results_rows(
    questions: pd.DataFrame,
    retrieval_results: pd.DataFrame,
    chunks: pd.DataFrame,
    per_query_metrics: pd.DataFrame,
    answers: pd.DataFrame | None = None,
    judgments: pd.DataFrame | None = None,
) -> Iterator[dict[str, Any]]:
    """One row per (question, retriever, k) present in `per_query_metrics` or `answers`, in question order, yielded
    one at a time: with texts kept whole, ten thousand questions' rows would otherwise be held together (save_run
    keeps only their cut copies).

    `questions` is the evalset table (id, question, type, weight, ...); the retrieved list is the retriever's first k
    results in rank order, with the chunk's rel_path, heading_path, page and text; texts are kept whole here
    (write_run cuts them). `judgments` may carry latency_s / cost_usd columns; they are then the judging stage's.
    """
    grid = per_query_metrics[["retriever", "k"]]
    if answers is not None:
        grid = pd.concat([grid, answers[["retriever", "k"]]])
    cells = sorted({(str(r), int(k)) for r, k in grid.itertuples(index=False)})

    chunk_info = chunks.set_index("chunk_id")[["rel_path", "heading_path", "page", "text"]]
    chunk_info = chunk_info[~chunk_info.index.duplicated()]
    ordered = retrieval_results.sort_values(["retriever", "query_id", "rank"], kind="stable")
    # A service under test's results carry their own chunk fields; ours come from the chunk table.
    own = [c for c in chunk_info.columns if c in ordered.columns]
    ordered = ordered.join(chunk_info, on="chunk_id", suffixes=("", "_chunks"))
    for column in own:
        ordered[column] = ordered[column].where(ordered[column].notna(), ordered[f"{column}_chunks"])
    retrieved: dict[tuple[str, str], list[dict[str, Any]]] = {}
    retrieval_latency: dict[tuple[str, str], float] = {}
    for (retriever, query_id), group in ordered.groupby(["retriever", "query_id"], sort=False):
        retrieved[(retriever, query_id)] = [
            {
                "rank": r.rank,
                "chunk_id": r.chunk_id,
                "doc_id": r.doc_id,
                "rel_path": r.rel_path,
                "heading_path": r.heading_path,
                "page": r.page,
                "score": r.score,
                "score_lexical": getattr(r, "score_lexical", None),
                "score_semantic": getattr(r, "score_semantic", None),
                "text": r.text,
            }
            for r in group.itertuples(index=False)
        ]
        if "latency_s" in group.columns:
            retrieval_latency[(retriever, query_id)] = group["latency_s"].iloc[0]

    metric_values: dict[tuple[str, str, int], dict[str, float]] = {}
    for r in per_query_metrics.itertuples(index=False):
        metric_values.setdefault((r.query_id, r.retriever, int(r.k)), {})[r.metric] = r.value
    answer_rows = {} if answers is None else _by_cell(answers)
    judgment_rows = {} if judgments is None else _group_by_cell(judgments)

    for q in questions.to_dict("records"):
        query_id = q["id"]
        for retriever, k in cells:
            cell = (query_id, retriever, k)
            if cell not in metric_values and cell not in answer_rows:
                continue
            answer = answer_rows.get(cell)
            judged = judgment_rows.get(cell, [])
            latency = {"retrieval": retrieval_latency.get((retriever, query_id))}
            cost: dict[str, Any] = {}
            if answer is not None:
                latency["generation"] = answer.get("latency_s")
                cost["generation"] = answer.get("cost_usd")
            if judged and "latency_s" in judged[0]:
                latency["judging"] = sum(j["latency_s"] or 0.0 for j in judged)
            if judged and "cost_usd" in judged[0]:
                cost["judging"] = sum(j["cost_usd"] or 0.0 for j in judged)
            yield jsonable(
                {
                    "query_id": query_id,
                    "question": q.get("question"),
                    "type": q.get("type"),
                    "weight": q.get("weight", 1.0),
                    "retriever": retriever,
                    "k": k,
                    "retrieved": retrieved.get((retriever, query_id), [])[:k],
                    "answer": None if answer is None else _answer_record(answer),
                    "judgments": [_judgment_record(j) for j in judged],
                    "latency_s": latency,
                    "cost_usd": cost,
                    "metrics": metric_values.get(cell, {}),
                }
            )


def _by_cell(frame: pd.DataFrame) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(r["query_id"], r["retriever"], int(r["k"])): r for r in frame.to_dict("records")}


def _group_by_cell(frame: pd.DataFrame) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    grouped: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in frame.to_dict("records"):
        grouped.setdefault((r["query_id"], r["retriever"], int(r["k"])), []).append(r)
    return grouped


def _answer_record(answer: dict[str, Any]) -> dict[str, Any]:
    record = {"text": answer.get("answer")}
    record.update({name: _parsed(name, answer.get(name)) for name in _ANSWER_FIELDS if name in answer})
    return record


def _judgment_record(judgment: dict[str, Any]) -> dict[str, Any]:
    record = {
        name: _parsed(name, value)
        for name, value in judgment.items()
        if name not in ("query_id", "retriever", "k", "latency_s", "cost_usd")
    }
    # Before results.jsonl cuts texts to 200 characters: a person's grade (judging/grades.py) is keyed by the whole
    # judge input, and a later run or a comparison finds it again by this digest.
    if isinstance(judgment.get("judge_input"), str) and judgment["judge_input"]:
        record["judge_input_sha256"] = judge_input_sha256(judgment["judge_input"])
    return record


def _parsed(name: str, value: Any) -> Any:
    """The tables keep nested values as JSON text; a run row keeps them as JSON."""
    if name in _JSON_TEXT_FIELDS and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars as Python numbers, NaN / inf / NA as None, tuples and arrays as lists.
    Anything else that JSON cannot hold is left for json.dumps to refuse."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, Path):
        return str(value)
    return value
