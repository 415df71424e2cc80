"""A team's judged runs end to end (issue 29): the sample data answered and judged by a scripted OpenAI-compatible
server on loopback whose answers' true quality and whose judge's bias the test sets, run with `rag-eval run`, and
graded as a person would grade them. Used by test_judge_scenario.py and, printing what it runs, by docs/judges.md's
"Can I trust the judge?".

The answerer writes "Quality Q." at the head of each answer; Q is the grade a careful person gives it (good answers
1-3 by the question, poor ones 0, a few 1). With `max_tokens` below GOOD_FROM the answers are the poor ones, as when
a team cuts the answer length too far. The correctness judge reads Q back and scores `bias + max(Q, 1)` (at most 5):
`bias` points too generous, and unable to tell a wrong answer (0) from a poor one (1).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval_assets.judging.grades import Grade, grades_path, load_grades, save_grades
from rag_eval_assets.runs.store import read_run
from rag_eval_assets_tests.llm_fault_server import Reply, schema_reply
from rag_eval_assets_tests.sample_config import write_sample_config

GOOD_FROM = 256  # max_tokens from which the answers are the good ones
QUALITY = re.compile(r"Quality (\d)\.")


@dataclass
class Judge:
    bias: int = 2


def _number(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def true_grade(question: str, good: bool) -> int:
    if good:
        return 1 + _number(question) % 3
    return 1 if _number(question) % 7 == 0 else 0


def responder(judge: Judge) -> Callable[[Any], Reply]:
    def reply(body: Any) -> Reply:
        schema = (body.get("response_format") or {}).get("schema") or {}
        content = body["messages"][-1]["content"]
        if schema.get("title") == "answer":
            question = content.split("Question: ", 1)[1].split("\n", 1)[0]
            grade = true_grade(question, body["max_tokens"] >= GOOD_FROM)
            return Reply(json.dumps({"answer": f"Quality {grade}. As the first passage says.", "citations": [1],
                                     "abstained": False, "abstain_reason": ""}))
        if schema.get("title") == "correctness":
            found = QUALITY.search(content.split("Answer:\n", 1)[1])
            score = min(5, judge.bias + max(int(found.group(1)), 1)) if found else 0
            return Reply(json.dumps({"reasoning": "scripted", "score": score}))
        return schema_reply(body)
    return reply


def write_config(directory: Path, evalset: Path, base_url: str, max_tokens: int) -> Path:
    """One cell (bm25, k 3) answered and judged by the server; the gate on the calibrated means."""
    return write_sample_config(
        directory,
        "retrievers: [bm25]\nk_values: [3]\nanswering: {answerer: llm, k_values: [3]}\n"
        f"llm: {{base_url: '{base_url}', model: judge-m, max_tokens: {max_tokens}}}\n"
        "report: {gate: {calibrated: true}}\n",
        evalset=evalset)


def grade(evalset: Path, run_dir: Path, good: bool, n: int) -> int:
    """The person grades the correctness of the first `n` judged answers of the run (by question id) with their true
    grade, appending to the grades file beside the evalset as `rag-eval label --grade` does; the grades written."""
    run = read_run(run_dir)
    version = run.config["version_tuple"]["judge"]["prompt_version"]
    judged = sorted((row["query_id"], row["question"], j["judge_input_sha256"]) for row in run.results
                    for j in row.get("judgments") or [] if j["judge"] == "correctness" and j.get("score") is not None)
    path = grades_path(evalset)
    kept = list(load_grades(path).values()) if path.exists() else []
    new = [Grade(q, "correctness", sha, true_grade(question, good), version) for q, question, sha in judged[:n]]
    save_grades(path, kept + new)
    return len(new)
