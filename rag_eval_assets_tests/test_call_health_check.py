"""The call_health check (metrics/call_health.py): who each cell's calls went to, without credentials,
which cells failed more often than the limit, and the note of a metric whose every call failed."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from rag_eval_assets.generation.judges import NOT_JUDGED_ABSTAINED
from rag_eval_assets.metrics.call_health import CALL_HEALTH_COLUMNS, check_call_health, endpoint, outage_notes
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.sample_config import write_sample_config

LLM = "llm: {base_url: 'https://key:s3cret@llm.example/v1', model: m, max_error_rate: 0.2}\n"
SERVICE = ("retrievers:\n  bm25: {kind: bm25}\n"
           "  svc: {kind: http, base_url: 'https://user:s3cret-pass@rag.example/t/?token=s3cret-token'}\n")


def _health(*rows: tuple) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=list(CALL_HEALTH_COLUMNS))


def test_each_stage_names_its_endpoint_without_credentials(tmp_path: Path):
    s = load_settings(write_sample_config(tmp_path, LLM + SERVICE))
    health = _health(("svc", 5, "answer", "answer", 10, 0, 0, 10, 0.0, None),
                     ("bm25", 5, "answer", "answer", 10, 0, 0, 10, 0.0, None),
                     ("bm25", 5, "judge", "correctness", 10, 0, 0, 10, 0.0, None),
                     ("bm25", 5, "ragas", "context_recall", 10, 0, 0, 10, 0.0, None))
    found = [endpoint(row, s.variants, s.answering.answerer, s.llm_for) for row in health.itertuples(index=False)]
    assert found == [
        ("the service under test", "https://user:***@rag.example/t/api/v1/ask?token=***&debug=true"),
        None,  # the extractive answerer calls nothing
        ("the judge", "https://key:***@llm.example/v1"),
        ("the ragas LLM", "https://key:***@llm.example/v1"),
    ]
    assert endpoint(health.iloc[2], s.variants, "extractive", lambda role: None) is None


def test_cells_over_the_limit_fail_the_check_naming_the_first_three(tmp_path: Path):
    s = load_settings(write_sample_config(tmp_path, LLM + SERVICE))

    def where(row):
        return endpoint(row, s.variants, s.answering.answerer, s.llm_for)

    assert check_call_health(_health(("bm25", 5, "answer", "answer", 10, 10, 0, 0, 1.0, "boom")), 0.2, where) \
        .description == "nothing to check: no LLM or service call was made"
    within = check_call_health(_health(("bm25", 5, "judge", "correctness", 10, 2, 0, 8, 0.2, "HTTP 500")), 0.2, where)
    assert (within.passed, within.description, within.metadata) == (
        True, "2 of 10 calls failed, within 20% per cell", {"calls": 10, "errors": 2, "max_error_rate": 0.2})

    bad = [("bm25", k, "judge", "groundedness", 4, 3, 0, 1, 0.75, "HTTP 500") for k in (1, 3, 5, 10)]
    failed = check_call_health(_health(*bad, ("bm25", 20, "judge", "groundedness", 4, 0, 0, 4, 0.0, None)), 0.2, where)
    assert not failed.passed
    assert failed.metadata == {"calls": 20, "errors": 12, "max_error_rate": 0.2, "failing_cells": 4}
    assert failed.description == "; ".join(
        f"bm25@{k} judge groundedness: 3 of 4 calls to the judge at https://key:***@llm.example/v1 failed "
        "(75% > 20%); first error: HTTP 500" for k in (1, 3, 5)) + "; and 1 more cells"


def test_a_metric_whose_every_call_failed_says_why():
    per_query = pd.DataFrame(
        [("q1", "bm25", 5, "correctness", math.nan, "HTTP 500: down\nstack"),
         ("q2", "bm25", 5, "correctness", math.nan, NOT_JUDGED_ABSTAINED),
         ("q1", "bm25", 5, "groundedness", math.nan, NOT_JUDGED_ABSTAINED),
         ("q1", "bm25", 5, "context_recall", 0.5, None),
         ("q2", "bm25", 5, "context_recall", math.nan, "ragas returned NaN"),
         ("q1", "bm25", 5, "hit@k", 1.0, None)],
        columns=["query_id", "retriever", "k", "metric", "value", "error"])
    assert outage_notes(per_query) == [
        ("bm25", 5, "correctness", "not computed: 1 of 1 calls failed (HTTP 500: down)"),
        ("bm25", 5, "groundedness", f"not computed: no row was sent ({NOT_JUDGED_ABSTAINED})"),
    ]
