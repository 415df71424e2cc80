"""The whole input of every judgement of a run, kept in its run directory (judge_inputs.jsonl) whatever
`report.store_full_text` says and whether the run's gate passed or not: grading (`rag-eval label --grade RUN`) shows
a person exactly what the judge of that run saw, which results.jsonl cuts to 200 characters and which the table
store keeps only for the run whose tables were last committed.

One line per judgement: query_id, retriever, k, judge, replicate and judge_input (the chat messages as JSON text,
whole; its sha256 is the judgement's judge_input_sha256 in results.jsonl).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

JUDGE_INPUTS_FILE = "judge_inputs.jsonl"
Key = tuple[str, str, int, str, int]  # query_id, retriever, k, judge, replicate


def judge_inputs_text(results: Iterable[Mapping[str, Any]]) -> str:
    """judge_inputs.jsonl of results rows as runs/pipeline_run.py makes them (texts whole)."""
    lines = []
    for row in results:
        for j in row.get("judgments") or []:
            text = j.get("judge_input")
            if not text:
                continue  # not sent: an abstention or a failed answer is not judged
            lines.append(json.dumps({"query_id": row["query_id"], "retriever": row["retriever"], "k": int(row["k"]),
                                     "judge": j.get("judge"), "replicate": int(j.get("replicate") or 0),
                                     "judge_input": text if isinstance(text, str) else json.dumps(
                                         text, ensure_ascii=False)}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def read_judge_inputs(run_dir: Path) -> dict[Key, str] | None:
    """The run's whole judge inputs by judgement, None when the run has no judge_inputs.jsonl (written before runs
    kept it)."""
    path = run_dir / JUDGE_INPUTS_FILE
    if not path.is_file():
        return None
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            out[(r["query_id"], r["retriever"], int(r["k"]), r["judge"], int(r["replicate"]))] = r["judge_input"]
    return out
