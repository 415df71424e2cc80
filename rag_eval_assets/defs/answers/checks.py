"""Seed 003's dev-subset gate as an asset check on the answer metrics."""

import dagster as dg
import pandas as pd

from rag_eval_assets.metrics.json_v2 import JSON_V2_SCORE, gate_from_values


@dg.asset_check(
    asset="answer_metrics_per_query",
    additional_ins={"dev_subset": dg.AssetIn()},
    description="Seed 003 dev gate: on the dev subset, JSON v2 score average >= 95 and schema pass rate >= 0.98, "
    "for every retriever and k.",
)
def json_v2_dev_gate(answer_metrics_per_query: pd.DataFrame, dev_subset: pd.DataFrame) -> dg.AssetCheckResult:
    rows = answer_metrics_per_query[answer_metrics_per_query["query_id"].isin(set(dev_subset["id"]))]
    scores = rows[rows["metric"] == JSON_V2_SCORE]
    if scores.empty:
        return dg.AssetCheckResult(
            passed=True, description="nothing to check: no seed 003 questions (answer_example) in the dev subset",
            metadata={"status": "nothing to check", "reason": "no seed 003 questions"},
        )
    schema = rows[rows["metric"] == "json_v2_schema_ok"].set_index(["retriever", "k", "query_id"])["value"]
    cells = {}
    for (retriever, k), group in scores.groupby(["retriever", "k"]):
        ok = [bool(schema[(retriever, k, q)]) for q in group["query_id"]]
        gate = gate_from_values(group["value"].tolist(), ok)
        cells[f"{retriever}@{k}"] = {"passed": gate.passed, "eval_score_avg": gate.eval_score_avg,
                                     "schema_pass_rate": gate.schema_pass_rate, "n": gate.n}
    failed = sorted(cell for cell, gate in cells.items() if not gate["passed"])
    return dg.AssetCheckResult(
        passed=not failed,
        metadata={"cells": dg.MetadataValue.json(cells)},
        description=f"gate failed for {', '.join(failed)}" if failed else None,
    )
