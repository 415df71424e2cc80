"""LLM judges (seed 002): groundedness and correctness, 0-5, with the full judge input stored.

Every answer gets one row per judge. Answers that abstained (or are empty) or whose call failed are not sent to a
judge: judging an abstention for groundedness is moot (abstention has its own metrics) and a failed answer has nothing to judge.
Their rows have score NaN and `error` NOT_JUDGED_ABSTAINED ("abstained") or NOT_JUDGED_ANSWER_ERROR
("answer_error"), so they are visible and told apart from judge failures, whose rows carry the client's error text.

Replicate mode re-judges a seeded sample of the judged answers `replicates` more times (replicate 1, 2, ...; the
main judgement is replicate 0). Only the cache key changes between replicates (the prompt version gets a
"#replicate=N" suffix, which is never sent to the server), so each replicate is a real call: with temperature 0 a
deterministic server agrees with itself, and judge_agreement measures whether it does.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from typing import Any

import pandas as pd

from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_from_frame
from rag_eval_assets.generation.answerers import format_contexts
from rag_eval_assets.generation.citations import contexts_from_json
from rag_eval_assets.generation.prompts import JUDGE_PROMPTS, prompt_version
from rag_eval_assets.llm.client import LLMClient
from rag_eval_assets.llm.prompts import Prompt
from rag_eval_assets.llm.settings import NO_LLM

JUDGES = ("groundedness", "correctness")
JUDGE_DISABLED = "not computed: judge.enabled is false"
NOT_JUDGED_ABSTAINED = "abstained"
NOT_JUDGED_ANSWER_ERROR = "answer_error"
NO_REFERENCE = "(none given)"

JUDGMENT_COLUMNS = (
    "query_id",
    "retriever",
    "k",
    "judge",
    "score",
    "supported_claims",
    "unsupported_claims",
    "reasoning",
    "judge_model",
    "judge_prompt_version",
    "temperature",
    "judge_input",
    "replicate",
    "error",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "cost_usd",
)
_DTYPES = {
    "query_id": "str",
    "retriever": "str",
    "k": "int64",
    "judge": "str",
    "score": "float64",
    "supported_claims": "str",
    "unsupported_claims": "str",
    "reasoning": "str",
    "judge_model": "str",
    "judge_prompt_version": "str",
    "temperature": "float64",
    "judge_input": "str",
    "replicate": "int64",
    "error": "str",
    "prompt_tokens": "Int64",
    "completion_tokens": "Int64",
    "latency_s": "float64",
    "cost_usd": "float64",
}


def why_not_judged(llm_configured: bool, enabled: bool) -> str | None:
    """Why the judges do not run (no llm section, judge.enabled false), or None when they do."""
    if not llm_configured:
        return NO_LLM
    return None if enabled else JUDGE_DISABLED


def judges_not_computed(llm_configured: bool, enabled: bool) -> list[tuple[str, str]]:
    """(metric, reason) of each judge metric when the judges do not run; none when they do."""
    reason = why_not_judged(llm_configured, enabled)
    return [(judge, reason) for judge in JUDGES] if reason is not None else []


def judge_answers(
    client: LLMClient,
    answers: pd.DataFrame,
    questions: pd.DataFrame,
    judge_prompt_version: str = "v1",
    replicates: int = 0,
    replicate_sample: int = 20,
    seed: int = 0,
) -> pd.DataFrame:
    """The judgments table (JUDGMENT_COLUMNS) for the answers table, judged against the evalset table `questions`.

    The correctness judge sees the question's reference answer (seed 004), else its expected key facts (seed 002)
    joined by "; ", else NO_REFERENCE.
    """
    if judge_prompt_version not in JUDGE_PROMPTS:
        raise ValueError(f"unknown judge prompt version {judge_prompt_version!r}; known: {sorted(JUDGE_PROMPTS)}")
    if replicates < 0 or replicate_sample < 0:
        raise ValueError(f"replicates and replicate_sample must be >= 0, got {replicates}, {replicate_sample}")
    prompts = JUDGE_PROMPTS[judge_prompt_version]
    by_id = {q.id: q for q in questions_from_frame(questions)}
    unknown = sorted(set(answers["query_id"]) - set(by_id))
    if unknown:
        raise ValueError(f"answers for query ids not in the evalset: {unknown[:5]}")
    settings = client.settings

    def base(row: Any, judge: str, replicate: int) -> dict[str, Any]:
        return {"query_id": row.query_id, "retriever": row.retriever, "k": int(row.k), "judge": judge,
                "score": math.nan, "supported_claims": "[]", "unsupported_claims": "[]", "reasoning": "",
                "judge_model": settings.model, "judge_prompt_version": judge_prompt_version,
                "temperature": settings.temperature, "judge_input": "", "replicate": replicate, "error": None,
                "prompt_tokens": None, "completion_tokens": None, "latency_s": math.nan, "cost_usd": math.nan}

    rows: list[dict[str, Any]] = []
    pending: list[tuple[int, dict[str, Any]]] = []  # (row index, chat_many request)
    judged: list[Any] = []
    for row in answers.itertuples(index=False):
        if isinstance(row.error, str):
            skip: str | None = NOT_JUDGED_ANSWER_ERROR
        else:
            # An empty answer says nothing: judged, it would be trivially "grounded". It counts as an abstention.
            skip = NOT_JUDGED_ABSTAINED if row.abstained or not str(row.answer or "").strip() else None
        if skip is None:
            judged.append(row)
        for judge in JUDGES:
            rows.append({**base(row, judge, 0), "error": skip})
            if skip is None:
                pending.append((len(rows) - 1, _request(prompts[judge], row, by_id[row.query_id], "")))
    rng = random.Random(seed)
    sample = rng.sample(judged, min(replicate_sample, len(judged))) if replicates else []
    for replicate in range(1, replicates + 1):
        for row in sample:
            for judge in JUDGES:
                rows.append(base(row, judge, replicate))
                request = _request(prompts[judge], row, by_id[row.query_id], f"#replicate={replicate}")
                pending.append((len(rows) - 1, request))

    calls = client.chat_many([request for _, request in pending])
    for (index, request), call in zip(pending, calls):
        out = rows[index]
        out.update(judge_model=call.model, judge_input=json.dumps(request["messages"], ensure_ascii=False),
                   prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                   latency_s=call.latency_s, cost_usd=call.cost_usd)
        if call.error is not None or call.data is None:
            out["error"] = call.error or "no structured reply"
            continue
        out["score"] = float(call.data["score"])
        out["supported_claims"] = json.dumps(call.data.get("supported_claims", []), ensure_ascii=False)
        out["unsupported_claims"] = json.dumps(call.data.get("unsupported_claims", []), ensure_ascii=False)
        out["reasoning"] = call.data.get("reasoning", "")
    return pd.DataFrame(rows, columns=list(JUDGMENT_COLUMNS)).astype(_DTYPES)


def _request(
    prompt_and_schema: tuple[Prompt, dict[str, Any]], row: Any, question: Question, suffix: str
) -> dict[str, Any]:
    prompt, schema = prompt_and_schema
    reference = question.reference_answer or "; ".join(question.expected_key_facts) or NO_REFERENCE
    values = {"contexts": format_contexts(contexts_from_json(row.contexts)), "question": question.question,
              "answer": row.answer, "reference": reference}
    messages = prompt.render(**{name: values[name] for name in prompt.fields})
    return {"messages": messages, "prompt_version": prompt_version(prompt) + suffix, "schema": schema}


def judgment_counts(judgments: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per judge, over the main judgements (replicate 0): judged (a score), errors (judge calls that failed),
    abstained and answer_errors (answers not sent to the judge)."""
    main = judgments[judgments["replicate"] == 0]
    out = {}
    for judge, group in main.groupby("judge", sort=True):
        error = group["error"]
        skipped = error.isin([NOT_JUDGED_ABSTAINED, NOT_JUDGED_ANSWER_ERROR])
        out[str(judge)] = {
            "judged": int(group["score"].notna().sum()),
            "errors": int((error.notna() & ~skipped).sum()),
            "abstained": int((error == NOT_JUDGED_ABSTAINED).sum()),
            "answer_errors": int((error == NOT_JUDGED_ANSWER_ERROR).sum()),
        }
    return out


def judge_agreement(judgments: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per judge: each replicate score paired with the main (replicate 0) score of the same answer, both present;
    `pairs`, `exact_agreement` (share of equal pairs) and `mean_abs_diff` (NaN when there are no pairs)."""
    keys = ["query_id", "retriever", "k", "judge"]
    scored = judgments[judgments["score"].notna()]
    main = scored[scored["replicate"] == 0][keys + ["score"]]
    reps = scored[scored["replicate"] > 0][keys + ["score"]]
    pairs = reps.merge(main, on=keys, suffixes=("_rep", "_main"))
    out: dict[str, dict[str, float]] = {}
    for judge in sorted(set(judgments["judge"])):
        p = pairs[pairs["judge"] == judge]
        diff = (p["score_rep"] - p["score_main"]).abs()
        out[str(judge)] = {
            "pairs": len(p),
            "exact_agreement": float((diff == 0).mean()) if len(p) else math.nan,
            "mean_abs_diff": float(diff.mean()) if len(p) else math.nan,
        }
    return out


def judge_input_sha256(judge_input: str | list[Any]) -> str:
    """The sha256 of a judge input, as the judged table keeps it (JSON text) or as a run row does (parsed): both
    give the same digest."""
    messages = json.loads(judge_input) if isinstance(judge_input, str) else judge_input
    canonical = json.dumps(messages, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
