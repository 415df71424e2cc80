"""The top of each metric's scale, the value of a perfect question, in one table: the judges score 0-5, seed 003's
json_v2_score is a percentage, and every other metric runs from 0 to 1. The gate counts a question as a success on a
metric once it reaches half its top (verdict/gate.py)."""

from __future__ import annotations

from rag_eval_assets.generation.judges import JUDGES
from rag_eval_assets.generation.prompts import JUDGE_TOP_SCORE
from rag_eval_assets.metrics.json_v2 import JSON_V2_SCORE, TOP_SCORE

TOP_OF_SCALE: dict[str, float] = {**dict.fromkeys(JUDGES, float(JUDGE_TOP_SCORE)), JSON_V2_SCORE: TOP_SCORE}


def top_of_scale(metric: str) -> float:
    return TOP_OF_SCALE.get(metric, 1.0)
