"""Scoring answers: every answer metric whose inputs a question has, in one long table, and a run summary.

Answers come from a JSON Lines file produced by another system (`load_answers`) or from the pipeline's answers
table (`answers_from_frame`); both give dicts {id, answer, contexts, abstained, abstained_inferred}. The pipeline's
answer metric tables over the retriever x k grid are `grid_per_query` and `grid_aggregate`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval_assets.corpus.text import read_utf8
from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.records import json_error, json_type, parse_json
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.evalset.tables import questions_for_metrics
from rag_eval_assets.generation.abstention import infer_abstention
from rag_eval_assets.generation.settings import DEFAULT_CITATION_PATTERN
from rag_eval_assets.metrics.abstention import attribution_hit
from rag_eval_assets.metrics.aggregate import aggregate_metrics
from rag_eval_assets.metrics.call_health import outage_notes
from rag_eval_assets.metrics.json_v2 import JSON_V2_SCORE, WEIGHTS, JsonV2Score, dev_gate, score_json_v2
from rag_eval_assets.metrics.rule_score import WEIGHTED_SCORE, has_rules, score_rules, weighted_score
from rag_eval_assets.metrics.text import text_metrics
from rag_eval_assets.retrieval.encoders import Encoder

PER_QUESTION_COLUMNS = ("query_id", "metric", "value")
RULE_METRICS = ("include_rate", "safe_ok", "base_score", "citation_ok", "citation_penalty", "question_score")
# answer_metrics_per_query; `error`: the failed call's text of a judge or ragas row (value NaN), so that an outage is
# counted and shown.
GRID_PER_QUERY_COLUMNS = ("query_id", "retriever", "k", "metric", "value", "error")
NO_RULES = ("not applicable: no question has a seed 000 rule (must_include, must_include_any, must_not_include, "
            "require_citation)")


def load_answers(path: str | Path, question_ids: Collection[str] | None = None) -> list[dict[str, Any]]:
    """Answers from JSON Lines, one object a line: id (string), answer (string; empty = no answer), optional
    contexts [{source_path, text}] (the chunks the answer was given, in rank order) and optional abstained (bool).
    Other keys are ignored. Raises InputError naming file, line and field for every bad line, an id given twice,
    and, when `question_ids` is given, an id that is not a question of the evalset."""
    file = str(path)
    problems: list[InputProblem] = []
    answers: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(read_utf8(Path(path)).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = parse_json(line)
        except ValueError as exc:
            problems.append(InputProblem(file, number, None, f"malformed JSON: {json_error(exc, with_line=False)}"))
            continue
        if not isinstance(value, dict):
            problems.append(InputProblem(file, number, None, f"expected a JSON object, got {json_type(value)}"))
            continue
        f = Fields(file, number, value, problems)
        qid = f.text("id", required=True, nonblank=True)
        answer = f.text("answer", required=True)
        contexts = [
            {"source_path": c.text("source_path", required=True), "text": c.text("text", required=True)}
            for c in f.objects("contexts")
        ]
        abstained = f.boolean("abstained", False) if f.given("abstained") else None
        if qid is None:
            continue
        if qid in first_line:
            f.problem("id", f"duplicate id {qid!r} (first given on line {first_line[qid]})")
            continue
        first_line[qid] = number
        if question_ids is not None and qid not in question_ids:
            f.problem("id", f"{qid!r} is not a question of the evalset")
        answers.append(
            {
                "id": qid,
                "answer": answer,
                "contexts": contexts if f.given("contexts") else None,
                "abstained": abstained,
                "abstained_inferred": False,
            }
        )
    if problems:
        raise InputError(problems)
    return answers


def answers_from_frame(answers: pd.DataFrame) -> list[dict[str, Any]]:
    """The pipeline's answers table (one retriever x k partition) as answer dicts. Rows whose generation failed
    (`error` set) are left out, so their questions count as unanswered rather than as empty answers."""
    ok = answers[answers["error"].isna()]
    return [
        {
            "id": row["query_id"],
            "answer": row["answer"],
            "contexts": [{"source_path": c["rel_path"], "text": c["text"]} for c in json.loads(row["contexts"])],
            "abstained": bool(row["abstained"]),
            "abstained_inferred": bool(row["abstained_inferred"]),
        }
        for row in ok.to_dict("records")
    ]


def score_answers(
    questions: Sequence[Question],
    answers: Sequence[Mapping[str, Any]],
    encoder: Encoder | None = None,
    citation_pattern: str | re.Pattern[str] = DEFAULT_CITATION_PATTERN,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(per_question, summary). per_question is long (query_id, metric, value), for every answered question:

    - seed 000 rule metrics (RULE_METRICS; citation_ok as 0/1) for the questions with at least one rule
      (must_include, must_include_any, must_not_include, require_citation); for the others they are not applicable
      and have no row;
    - seed 003 json_v2_score (0-100), json_v2_schema_ok and the seven json_v2_<part> (NaN when the schema fails)
      when the question has an answer_example; grounding uses the answer's contexts (none given: grounding 0);
    - seed 004 token_f1, exact_match, rouge_l (and semantic_similarity with an encoder) when it has a
      reference_answer;
    - seed 002's abstention metrics, as in metrics.abstention: abstention_accuracy and
      hallucination_rate_unanswerable for unanswerable questions (answerable false or type negative), answered_rate
      for the others. An answer without a reported abstained flag is judged by generation.abstention.infer_abstention
      (empty, or a refusal phrase); such flags are counted as inferred. An empty answer counts as abstained (inferred)
      even when the answer said abstained false;
    - an empty or abstained answer scores 0 on json_v2 and the text metrics when the question expects an answer,
      and full marks when it expects abstention; on seed 000's rules an empty answer scores 0 whatever the question
      expects, and any answer with text (a refusal included) gets the seed's formula (docs/metrics.md).

    summary: n (answered questions), n_questions, missing_answers (ids), weighted_score (seed 000, over the answered
    questions with rules; None when no question has rules), means (metric -> mean over defined values), json_v2_gate (seed 003) and abstention when applicable.
    """
    known = {q.id for q in questions}
    problems = [
        InputProblem("answers", i, "id", f"{a['id']!r} is not a question of the evalset")
        for i, a in enumerate(answers)
        if a["id"] not in known
    ]
    answered: dict[str, Mapping[str, Any]] = {}
    for i, a in enumerate(answers):
        if a["id"] in answered:
            problems.append(InputProblem("answers", i, "id", f"duplicate id {a['id']!r}"))
        answered[a["id"]] = a
    if problems:
        raise InputError(problems)
    scored = [q for q in questions if q.id in answered]
    records: list[tuple[str, str, float]] = []
    rule_scores: list[float] = []
    rule_weights: list[float] = []
    json_scores: list[JsonV2Score] = []
    abstentions: list[tuple[bool, bool]] = []  # (correct, inferred)
    silent: set[str] = set()  # empty or abstained: scored by the question's expectation, not by the text
    for q in scored:
        a = answered[q.id]
        abstained, inferred = a.get("abstained"), bool(a.get("abstained_inferred"))
        if abstained is None:
            abstained, inferred = infer_abstention(a["answer"]) is not None, True
        if not abstained and not a["answer"].strip():  # an empty answer says nothing, whatever flag came with it
            abstained, inferred = True, True
        if abstained:
            silent.add(q.id)
        if has_rules(q):
            rules = score_rules(q, a["answer"], citation_pattern)
            rule_scores.append(rules.question_score)
            rule_weights.append(q.weight)
            records += [(q.id, name, float(getattr(rules, name))) for name in RULE_METRICS]
        if q.answer_example is not None:
            js = score_json_v2(q.answer_example, a["answer"], a.get("contexts") or [], abstained, q.is_negative)
            json_scores.append(js)
            records += [(q.id, JSON_V2_SCORE, js.score), (q.id, "json_v2_schema_ok", float(js.schema_ok))]
            records += [(q.id, f"json_v2_{name}", js.parts.get(name, math.nan)) for name in WEIGHTS]
        if q.is_negative:
            abstentions.append((abstained, inferred))
            records += [(q.id, "abstention_accuracy", float(abstained)),
                        (q.id, "hallucination_rate_unanswerable", 1.0 - float(abstained))]
        else:
            records.append((q.id, "answered_rate", 1.0 - float(abstained)))
    with_reference = [q for q in scored if q.reference_answer is not None]
    if with_reference:
        preds = [answered[q.id]["answer"] for q in with_reference]
        table = text_metrics(preds, [q.reference_answer for q in with_reference], encoder)
        for q, row in zip(with_reference, table.to_dict("records")):
            # Saying nothing matches no reference, unless the question expects exactly that.
            records += [(q.id, name, float(q.is_negative) if q.id in silent else float(value))
                        for name, value in row.items()]

    per_question = pd.DataFrame(records, columns=list(PER_QUESTION_COLUMNS)).astype({"value": float})
    summary: dict[str, Any] = {
        "n": len(scored),
        "n_questions": len(questions),
        "missing_answers": [q.id for q in questions if q.id not in answered],
        WEIGHTED_SCORE: weighted_score(rule_scores, rule_weights) if rule_scores else None,
        "means": _means(per_question),
    }
    if json_scores:
        summary["json_v2_gate"] = asdict(dev_gate(json_scores))
    if abstentions:
        summary["abstention"] = {
            "n": len(abstentions),
            "accuracy": sum(c for c, _ in abstentions) / len(abstentions),
            "n_inferred": sum(i for _, i in abstentions),
        }
    return per_question, summary


def _means(per_question: pd.DataFrame) -> dict[str, float]:
    defined = per_question[per_question["value"].notna()]
    means = defined.groupby("metric", sort=False)["value"].mean()
    return {name: float(means[name]) for name in pd.unique(per_question["metric"]) if name in means.index}


def grid_per_query(
    questions: Sequence[Question],
    answers: Mapping[str, pd.DataFrame],
    judged: Mapping[str, pd.DataFrame],
    ragas: pd.DataFrame,
    gold_of: Callable[[str], pd.DataFrame],
    chunks_of: Callable[[str], pd.DataFrame],
    encoder: Encoder | None,
    citation_pattern: str,
) -> pd.DataFrame:
    """answer_metrics_per_query: every answer metric per question, retriever and k (GRID_PER_QUERY_COLUMNS) from
    the answers and judged_answers partitions (by partition key) and the ragas rows; `error` is why a judge or
    ragas value is NaN (the failed call's text), null on every other row. `gold_of(retriever)` and
    `chunks_of(retriever)` are the gold labels and chunks of the chunking the retriever searched."""
    tables = []
    for key in sorted(answers):  # one partition in memory at a time
        table = answers[key]
        retriever, k = str(table["retriever"].iloc[0]), int(table["k"].iloc[0])
        per_question, _ = score_answers(questions, answers_from_frame(table), encoder, citation_pattern)
        tables.append(per_question.assign(retriever=retriever, k=k))
        tables.append(attribution_hit(table, gold_of(retriever), chunks_of(retriever)))
        judgments = judged.get(key)
        if judgments is not None and len(judgments):
            main = judgments[judgments["replicate"] == 0]
            tables.append(main.rename(columns={"judge": "metric", "score": "value"})[list(GRID_PER_QUERY_COLUMNS)])
    per_query = pd.concat([*tables, ragas] if len(ragas) else tables, ignore_index=True).reindex(
        columns=list(GRID_PER_QUERY_COLUMNS))
    per_query["error"] = per_query["error"].astype(object).where(per_query["error"].notna(), None)
    return per_query.astype({"k": "int64", "value": "float64", "error": "object"})


def grid_aggregate(per_query: pd.DataFrame, questions: Sequence[Question],
                   not_computed: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """answer_metrics: aggregate_metrics of `per_query`, seed 000's weighted score per retriever and k, and a row
    per metric not computed (value NaN, n 0, the reason in `note`): `not_computed` (metric, reason) in every cell,
    the weighted score where no question has a rule, and each metric whose every call failed (call_health.py)."""
    table = aggregate_metrics(per_query, questions_for_metrics(list(questions)))
    table["note"] = None
    weights = {q.id: q.weight for q in questions}
    scores = per_query[per_query["metric"] == "question_score"]
    weighted = [
        (r, k, "all", WEIGHTED_SCORE, weighted_score(g["value"].tolist(), [weights[q] for q in g["query_id"]]),
         float("nan"), float("nan"), len(g), None)
        for (r, k), g in scores.groupby(["retriever", "k"])
    ]
    grid = list(table[["retriever", "k"]].drop_duplicates().itertuples(index=False))
    not_applicable = [] if any(has_rules(q) for q in questions) else [(WEIGHTED_SCORE, NO_RULES)]
    missing = [(r, k, "all", m, float("nan"), float("nan"), float("nan"), 0, reason)
               for r, k in grid for m, reason in [*not_computed, *not_applicable]]
    missing += [(r, k, "all", m, float("nan"), float("nan"), float("nan"), 0, note)
                for r, k, m, note in outage_notes(per_query)]
    return pd.concat([table, pd.DataFrame(weighted + missing, columns=table.columns)], ignore_index=True)
