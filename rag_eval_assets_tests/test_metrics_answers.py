"""Scoring answers produced elsewhere: the JSONL loader's error locations, which metrics apply to which question,
the per-question table and the summary (seed 000 weighted score, seed 003 gate, abstention)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.metrics.answers import RULE_METRICS, answers_from_frame, load_answers, score_answers

ANSWER_EXAMPLE = {
    "target_audience": "新進維運工程師",
    "main_topic": "資料庫備份",
    "sub_topic": "增量備份",
    "detailed_description": ["備份檔保存三十天"],
    "original_evidence": "資料庫每天凌晨兩點自動執行增量備份，備份檔保存三十天，失敗時發送告警郵件給值班人員。",
    "predicted_questions": ["備份檔保存多久？"],
}
CONTEXT = {"source_path": "ops/backup.md", "text": ANSWER_EXAMPLE["original_evidence"]}

QUESTIONS = [
    Question(
        id="q001",
        question="Какая выручка за 2023 год?",
        format="seed000",
        must_include=("2023",),
        must_not_include=("XX", "??"),
        require_citation=True,
        weight=3.0,
    ),
    Question(id="q002", question="備份檔保存多久？", format="seed003", answer_example=ANSWER_EXAMPLE),
    Question(id="q003", question="Сколько хранятся копии?", format="seed004", reference_answer="Тридцать дней."),
    Question(id="q004", question="What is the CEO's shoe size?", format="seed002", answerable=False),
    Question(id="q005", question="Unanswered?", format="seed002"),
]


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_answers(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            json.dumps({"id": "q001", "answer": "Выручка 2023 года (стр. 4)", "extra": 1}, ensure_ascii=False),
            "",
            json.dumps({"id": "q002", "answer": "{}", "contexts": [CONTEXT]}, ensure_ascii=False),
            json.dumps({"id": "q004", "answer": "I cannot answer that.", "abstained": True}),
        ],
    )
    assert load_answers(path, {"q001", "q002", "q004"}) == [
        {"id": "q001", "answer": "Выручка 2023 года (стр. 4)", "contexts": None, "abstained": None,
         "abstained_inferred": False},
        {"id": "q002", "answer": "{}", "contexts": [CONTEXT], "abstained": None, "abstained_inferred": False},
        {"id": "q004", "answer": "I cannot answer that.", "contexts": None, "abstained": True,
         "abstained_inferred": False},
    ]  # fmt: skip


def test_load_answers_reports_every_problem_with_its_location(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            json.dumps({"id": "q001", "answer": "ok"}),
            '{"id": "q002", "answer": "unterminated}',
            json.dumps({"answer": "no id"}),
            json.dumps({"id": "q003", "answer": 42}),
            json.dumps({"id": "q004", "answer": "x", "contexts": [{"source_path": "a.md"}, "text"]}),
            json.dumps({"id": "q009", "answer": "x"}),
            json.dumps({"id": "q001", "answer": "again"}),
            json.dumps(["not", "an", "object"]),
            json.dumps({"id": "q005", "answer": None, "abstained": "yes"}),
        ],
    )
    with pytest.raises(InputError) as caught:
        load_answers(path, {q.id for q in QUESTIONS})
    file = str(path)
    bad_json, *others = caught.value.problems
    assert (bad_json.file, bad_json.line, bad_json.field) == (file, 2, None)
    assert bad_json.message.startswith("malformed JSON: Unterminated string")
    assert others == [
        InputProblem(file, 3, "id", "required field is missing"),
        InputProblem(file, 4, "answer", "expected a string, got number"),
        InputProblem(file, 5, "contexts[0].text", "required field is missing"),
        InputProblem(file, 5, "contexts[1]", "expected an object, got string"),
        InputProblem(file, 6, "id", "'q009' is not a question of the evalset"),
        InputProblem(file, 7, "id", "duplicate id 'q001' (first given on line 1)"),
        InputProblem(file, 8, None, "expected a JSON object, got array"),
        InputProblem(file, 9, "answer", "required field is null"),
        InputProblem(file, 9, "abstained", "expected true or false, got string 'yes'"),
    ]


def test_score_answers_applies_each_metric_where_its_inputs_exist() -> None:
    json_answer = json.dumps(
        {**ANSWER_EXAMPLE, "source_map": [{"refs": [{"file": "ops/backup.md", "anchors": ["增量備份"]}]}]},
        ensure_ascii=False,
    )
    answers = [
        {"id": "q001", "answer": "Выручка за 2023 год — 5 млрд."},  # no citation: 1.0 - 0.2
        {"id": "q002", "answer": json_answer, "contexts": [CONTEXT]},
        {"id": "q003", "answer": "Копии хранятся тридцать дней."},
        {"id": "q004", "answer": "   "},  # empty: abstained, inferred
    ]
    per_question, summary = score_answers(QUESTIONS, answers)
    assert list(per_question.columns) == ["query_id", "metric", "value"]
    value = {(r.query_id, r.metric): r.value for r in per_question.itertuples()}

    assert value[("q001", "question_score")] == pytest.approx(0.8)
    assert value[("q001", "citation_ok")] == 0.0
    assert value[("q001", "citation_penalty")] == pytest.approx(0.2)
    # Seed 000's rule metrics apply only to a question with a rule: q002-q004 have none, so none of it, never 1.0.
    assert all((q, m) not in value for q in ("q002", "q003", "q004") for m in RULE_METRICS)
    assert value[("q002", "json_v2_score")] == pytest.approx(100.0)
    assert value[("q002", "json_v2_schema_ok")] == 1.0
    assert value[("q002", "json_v2_grounding")] == 1.0
    assert ("q001", "json_v2_score") not in value
    # "копии хранятся тридцать дней" vs "тридцать дней": overlap 2 -> P 2/4, R 2/2 -> F1 2/3
    assert value[("q003", "token_f1")] == pytest.approx(2 / 3)
    assert value[("q003", "rouge_l")] == pytest.approx(2 / 3)
    assert value[("q003", "exact_match")] == 0.0
    assert ("q003", "semantic_similarity") not in value  # no encoder given
    assert value[("q004", "abstention_accuracy")] == 1.0
    assert value[("q004", "hallucination_rate_unanswerable")] == 0.0
    assert value[("q001", "answered_rate")] == 1.0 and ("q004", "answered_rate") not in value
    assert {q for q, _ in value} == {"q001", "q002", "q003", "q004"}

    assert summary["n"] == 4 and summary["n_questions"] == 5
    assert summary["missing_answers"] == ["q005"]
    # Over the questions with rules only: q001 alone.
    assert summary["weighted_score"] == pytest.approx(0.8)
    assert summary["json_v2_gate"] == {"passed": True, "eval_score_avg": 100.0, "schema_pass_rate": 1.0, "n": 1}
    assert summary["abstention"] == {"n": 1, "accuracy": 1.0, "n_inferred": 1}
    assert summary["means"]["question_score"] == pytest.approx(0.8)
    assert summary["means"]["token_f1"] == pytest.approx(2 / 3)


def test_schema_failure_leaves_parts_undefined_and_fails_the_gate() -> None:
    per_question, summary = score_answers(QUESTIONS[1:2], [{"id": "q002", "answer": "```json\n{}\n```"}])
    value = {r.metric: r.value for r in per_question.itertuples()}
    assert (value["json_v2_score"], value["json_v2_schema_ok"]) == (0.0, 0.0)
    assert math.isnan(value["json_v2_grounding"])
    assert "json_v2_grounding" not in summary["means"]
    assert summary["json_v2_gate"]["passed"] is False


def test_reported_abstention_flag_wins_over_inference() -> None:
    answers = [{"id": "q004", "answer": "I don't know.", "abstained": True}]
    per_question, summary = score_answers(QUESTIONS, answers)
    assert per_question.query("metric == 'abstention_accuracy'")["value"].tolist() == [1.0]
    assert summary["abstention"] == {"n": 1, "accuracy": 1.0, "n_inferred": 0}
    _, summary = score_answers(QUESTIONS, [{"id": "q004", "answer": "Size 44."}])
    assert summary["abstention"] == {"n": 1, "accuracy": 0.0, "n_inferred": 1}
    # No flag: a refusal phrase is an (inferred) abstention, the same rule the pipeline's answerers use.
    _, summary = score_answers(QUESTIONS, [{"id": "q004", "answer": "I don't know."}])
    assert summary["abstention"] == {"n": 1, "accuracy": 1.0, "n_inferred": 1}


def test_unknown_and_duplicate_ids_are_refused() -> None:
    with pytest.raises(InputError) as caught:
        score_answers(QUESTIONS, [{"id": "qX", "answer": ""}] + [{"id": "q001", "answer": ""}] * 2)
    assert caught.value.problems == [
        InputProblem("answers", 0, "id", "'qX' is not a question of the evalset"),
        InputProblem("answers", 2, "id", "duplicate id 'q001'"),
    ]


def test_answers_from_the_pipeline_table() -> None:
    contexts = [{"chunk_id": "c1", "rel_path": "ops/backup.md", "heading_path": "", "page": None, "text": "備份"}]
    table = pd.DataFrame(
        {
            "query_id": ["q002", "q004", "q001"],
            "answer": ["{}", "", "boom"],
            "contexts": [json.dumps(contexts, ensure_ascii=False), "[]", "[]"],
            "abstained": [False, True, False],
            "abstained_inferred": [False, True, False],
            "error": [None, None, "timeout"],  # a failed generation is no answer
        }
    )
    assert answers_from_frame(table) == [
        {"id": "q002", "answer": "{}", "contexts": [{"source_path": "ops/backup.md", "text": "備份"}],
         "abstained": False, "abstained_inferred": False},
        {"id": "q004", "answer": "", "contexts": [], "abstained": True, "abstained_inferred": True},
    ]  # fmt: skip
    _, summary = score_answers(QUESTIONS, answers_from_frame(table))
    assert summary["missing_answers"] == ["q001", "q003", "q005"]
    assert summary["abstention"] == {"n": 1, "accuracy": 1.0, "n_inferred": 1}


def test_a_seed_002_evalset_without_rules_never_gets_a_weighted_score_of_one() -> None:
    questions = [Question(id=f"s{i}", question=f"Question {i}?", format="seed002") for i in range(3)]
    per_question, summary = score_answers(questions, [{"id": q.id, "answer": "Some answer."} for q in questions])
    assert not set(per_question["metric"]) & set(RULE_METRICS)
    assert summary["weighted_score"] is None and "question_score" not in summary["means"]


def test_the_default_citation_pattern_knows_four_languages() -> None:
    cited = Question(id="c", question="Where?", format="seed000", require_citation=True)
    for answer in ("См. стр. 12.", "See p. 4.", "See page 7", "Page 12 says so.", "见第12页。", "見第 3 页"):
        assert score_answers([cited], [{"id": "c", "answer": answer}])[0].set_index("metric")["value"][
            "citation_ok"] == 1.0, answer
    for answer in ("No citation here.", "top. 5", "pages", "第页"):
        assert score_answers([cited], [{"id": "c", "answer": answer}])[0].set_index("metric")["value"][
            "citation_ok"] == 0.0, answer


def test_an_empty_or_abstained_answer_scores_zero_where_an_answer_is_expected_per_seed_format() -> None:
    questions = [
        Question(id="r1", question="Какая выручка?", format="seed000", must_not_include=("XX",)),
        Question(id="r2", question="Какая прибыль?", format="seed000", must_not_include=("не знаю",),
                 require_citation=True),
        QUESTIONS[1],  # seed 003, answer_example
        QUESTIONS[2],  # seed 004, reference "Тридцать дней."
        Question(id="a1", question="Who approves a release?", format="seed002", answerable=True),
        Question(id="f1", question="Что такое залог?", format="seed001", type="definition",
                 reference_answer="Способ обеспечения обязательства."),
    ]
    # Empty text with abstained: false (as a service that failed silently reports it), or a refusal.
    answers = [
        {"id": "r1", "answer": ""},
        {"id": "r2", "answer": "Не знаю.", "abstained": True},
        {"id": "q002", "answer": " ", "abstained": False, "contexts": [CONTEXT]},
        {"id": "q003", "answer": "Не знаю.", "abstained": True},
        {"id": "a1", "answer": "", "abstained": False},
        {"id": "f1", "answer": "I don't know."},
    ]
    per_question, summary = score_answers(questions, answers)
    value = {(r.query_id, r.metric): r.value for r in per_question.itertuples()}
    # seed 000: literally 0.7 * 1 (no groups) + 0.3 * 1 (nothing forbidden said) = 1.0; here nothing was said.
    assert [value[("r1", m)] for m in RULE_METRICS] == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # seed 000 scores a refusal by its formula, abstained or not: include_rate 1.0 (no groups), safe_ok 0.0 ("не
    # знаю" is forbidden by this question), no citation: 0.7 * 1.0 + 0.3 * 0.0 - 0.2 = 0.5.
    assert [value[("r2", m)] for m in RULE_METRICS] == pytest.approx([1.0, 0.0, 0.7, 0.0, 0.2, 0.5])
    assert (value[("q002", "json_v2_score")], value[("q002", "json_v2_schema_ok")]) == (0.0, 0.0)
    assert [value[("q003", m)] for m in ("token_f1", "exact_match", "rouge_l")] == [0.0, 0.0, 0.0]
    assert [value[("f1", m)] for m in ("token_f1", "exact_match", "rouge_l")] == [0.0, 0.0, 0.0]
    # seed 002: the empty answer flagged abstained false did not answer.
    assert {q: value[(q, "answered_rate")] for q in ("r1", "r2", "q002", "q003", "a1", "f1")} == dict.fromkeys(
        ("r1", "r2", "q002", "q003", "a1", "f1"), 0.0)
    assert summary["weighted_score"] == pytest.approx((0.0 + 0.5) / 2)


def test_an_abstention_is_the_right_answer_where_the_question_expects_it() -> None:
    questions = [
        Question(id="n2", question="What is the CEO's shoe size?", format="seed002", answerable=False),
        Question(id="n1", question="Какой размер обуви у директора?", format="seed001", type="negative",
                 reference_answer="В документах этого нет.", must_not_include=("42",)),
    ]
    answers = [{"id": "n2", "answer": "", "abstained": False}, {"id": "n1", "answer": "Не знаю.", "abstained": True}]
    per_question, summary = score_answers(questions, answers)
    value = {(r.query_id, r.metric): r.value for r in per_question.itertuples()}
    assert (value[("n2", "abstention_accuracy")], value[("n2", "hallucination_rate_unanswerable")]) == (1.0, 0.0)
    # seed 000's formula on the refusal's text: no groups (1.0), "42" not said (1.0), no citation required.
    assert value[("n1", "question_score")] == 1.0 and value[("n1", "citation_penalty")] == 0.0
    assert [value[("n1", m)] for m in ("token_f1", "exact_match", "rouge_l")] == [1.0, 1.0, 1.0]
    # n2's empty answer came with abstained: false, so its abstention is inferred; n1 reported its own.
    assert summary["abstention"] == {"n": 2, "accuracy": 1.0, "n_inferred": 1}
