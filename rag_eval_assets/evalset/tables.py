"""Questions as a table: one row per question, nested fields as JSON text (see schema.JSON_COLUMNS)."""

from __future__ import annotations

import pandas as pd

from rag_eval_assets.evalset.schema import COLUMNS, Question, question_from_row, question_to_row


def questions_to_frame(questions: list[Question]) -> pd.DataFrame:
    df = pd.DataFrame([question_to_row(q) for q in questions], columns=list(COLUMNS))
    df["source_line"] = df["source_line"].astype("Int64")
    return df


def questions_from_frame(df: pd.DataFrame) -> list[Question]:
    # Parquet brings optional text and integer fields back as NaN / NA; the schema's "absent" is None.
    plain = df.astype(object)
    rows = plain.where(plain.notna(), None).to_dict("records")
    return [question_from_row(row) for row in rows]


def questions_for_metrics(questions: list[Question]) -> pd.DataFrame:
    """The question attributes metrics and slices need (query_id, type, category, difficulty, tags, ...)."""
    return pd.DataFrame(
        {
            "query_id": [q.id for q in questions],
            "type": [q.type for q in questions],
            "category": [q.category for q in questions],
            "difficulty": [q.difficulty for q in questions],
            "tags": [list(q.tags) for q in questions],
            "folders": [list(q.folders) for q in questions],
            "is_negative": [q.is_negative for q in questions],
            "required_support_groups": [
                None if q.required_support_groups is None else [list(g) for g in q.required_support_groups]
                for q in questions
            ],
        }
    )
