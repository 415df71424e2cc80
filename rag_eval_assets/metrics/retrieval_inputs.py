"""The input tables of the retrieval metrics checked before anything is computed: missing columns, values of the
wrong kind, ranks, grades, support indices and gold sources out of range, malformed support groups and folder
filters, each an InputProblem naming the table, the row and the column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.metrics.ranked_lists import GOLD_SOURCES

RESULT_FIELDS = {"query_id": "str", "retriever": "str", "rank": "int", "chunk_id": "str", "doc_id": "str"}
GOLD_FIELDS = {
    "query_id": "str",
    "chunk_id": "str",
    "doc_id": "str",
    "grade": "int",
    "support_index": "int",
    "source": "str",
}
QUESTION_FIELDS = {"query_id": "str", "is_negative": "bool"}
_KIND_WORDS = {"str": "a string", "int": "an integer", "bool": "a boolean"}


def input_problems(
    results: pd.DataFrame,
    gold: pd.DataFrame,
    questions: pd.DataFrame,
    folder_filter: Mapping[str, Sequence[str]] | None,
    chunks: pd.DataFrame | None,
) -> list[InputProblem]:
    problems = frame_problems(results, "results", RESULT_FIELDS)
    problems += frame_problems(gold, "gold", GOLD_FIELDS)
    problems += frame_problems(questions, "questions", QUESTION_FIELDS)
    if "rank" in results.columns and pd.api.types.is_integer_dtype(results["rank"].dtype):
        problems += _row_problems(results, "results", "rank", results["rank"] < 1, "must be >= 1")
        key = [c for c in ("retriever", "query_id", "rank") if c in results.columns]
        problems += _row_problems(
            results, "results", "rank", results.duplicated(key, keep="first"), "repeats a rank of this retriever/query"
        )
    if "grade" in gold.columns and pd.api.types.is_integer_dtype(gold["grade"].dtype):
        problems += _row_problems(gold, "gold", "grade", gold["grade"] < 1, "must be >= 1")
    if "support_index" in gold.columns and pd.api.types.is_integer_dtype(gold["support_index"].dtype):
        problems += _row_problems(gold, "gold", "support_index", gold["support_index"] < -1, "must be >= -1")
    if "source" in gold.columns:
        problems += _row_problems(
            gold, "gold", "source", ~gold["source"].isin(GOLD_SOURCES), f"must be one of {', '.join(GOLD_SOURCES)}"
        )
    if "query_id" in questions.columns:
        problems += _row_problems(
            questions, "questions", "query_id", questions["query_id"].duplicated(), "repeats an earlier query_id"
        )
    if "required_support_groups" not in questions.columns:
        problems.append(InputProblem("questions", None, "required_support_groups", "missing column"))
    else:
        for line, groups in enumerate(questions["required_support_groups"]):
            if groups is not None and not _is_groups(groups):
                problems.append(
                    InputProblem(
                        "questions",
                        line,
                        "required_support_groups",
                        f"must be null or a non-empty list of non-empty lists of support indices, got {groups!r}",
                    )
                )
    if folder_filter is not None:
        if chunks is None:
            problems.append(InputProblem("chunks", None, None, "a chunks table is required with a folder filter"))
        else:
            problems += frame_problems(chunks, "chunks", {"chunk_id": "str", "rel_path": "str"})
        for query_id, folders in folder_filter.items():
            if isinstance(folders, str) or not all(isinstance(f, str) for f in folders):
                problems.append(
                    InputProblem("folder_filter", None, str(query_id), f"must be a list of folders, got {folders!r}")
                )
    return problems


def _is_groups(groups: object) -> bool:
    def is_list(value: object) -> bool:
        return isinstance(value, (list, tuple, np.ndarray)) and len(value) > 0

    return is_list(groups) and all(
        is_list(group)
        and all(isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) and s >= 0 for s in group)
        for group in groups
    )


def frame_problems(frame: pd.DataFrame, name: str, fields: Mapping[str, str]) -> list[InputProblem]:
    """Missing columns and values of the wrong kind ("str", "int" or "bool"); a problem's line is the 0-based row
    position, as for a JSON array."""
    problems = []
    for column, kind in fields.items():
        if column not in frame.columns:
            problems.append(InputProblem(name, None, column, "missing column"))
            continue
        values = frame[column]
        if kind == "int" and pd.api.types.is_integer_dtype(values.dtype):
            continue
        if kind == "bool" and pd.api.types.is_bool_dtype(values.dtype):
            continue
        if kind == "str" and isinstance(values.dtype, pd.StringDtype) and not values.isna().any():
            continue
        problems += _row_problems(
            frame, name, column, ~values.map(_IS_KIND[kind]).to_numpy(dtype=bool), f"must be {_KIND_WORDS[kind]}"
        )
    return problems


_IS_KIND = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)),
    "bool": lambda v: isinstance(v, (bool, np.bool_)),
}


def _row_problems(
    frame: pd.DataFrame, name: str, column: str, bad: pd.Series | np.ndarray, message: str
) -> list[InputProblem]:
    rows = np.flatnonzero(np.asarray(bad, dtype=bool))
    return [InputProblem(name, int(i), column, f"{message}, got {_plain(frame[column].iloc[i])!r}") for i in rows]


def _plain(value: object) -> object:
    """numpy scalars as the Python values a user wrote, so messages read `got 0`, not `got np.int64(0)`."""
    return value.item() if isinstance(value, np.generic) else value
