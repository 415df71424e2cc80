"""The system under test's responses as a table: one call per question per run, at the largest k with debug=true,
from which its retrieval results and its answers at every k are read. A failed call is a row with its error (kept,
counted, shown), never a missing question."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from rag_eval_assets.redaction import redact_text
from rag_eval_assets.retrieval.http_sut import SutResponse, parse_sut_response, sut_results_frame

SUT_RESPONSE_COLUMNS = ("query_id", "retriever", "body", "latency_s", "attempts", "error")


def responses_frame(query_ids: Sequence[str], name: str, outcomes: Sequence[SutResponse | Exception]) -> pd.DataFrame:
    rows = [
        (qid, name, None, None, None, redact_text(str(o))) if isinstance(o, Exception)
        else (qid, name, json.dumps(o.raw, ensure_ascii=False), o.latency_s, o.attempts, None)
        for qid, o in zip(query_ids, outcomes, strict=True)
    ]
    return pd.DataFrame(rows, columns=list(SUT_RESPONSE_COLUMNS)).astype(
        {"latency_s": "float64", "attempts": "Int64", "body": "object", "error": "object"}
    )


def read_responses(frame: pd.DataFrame, url: str) -> dict[str, SutResponse | str]:
    """query_id -> the parsed response, or the error text of a call that failed."""
    return {
        row.query_id: row.error if isinstance(row.error, str) else
        parse_sut_response(row.body.encode("utf-8"), url, float(row.latency_s), int(row.attempts))
        for row in frame.itertuples(index=False)
    }


def results_from_responses(frame: pd.DataFrame, url: str, name: str) -> pd.DataFrame:
    """The long retrieval results of the questions whose call succeeded (a failed one retrieved nothing)."""
    ok = {qid: r for qid, r in read_responses(frame, url).items() if not isinstance(r, str)}
    return sut_results_frame(list(ok), list(ok.values()), name)
