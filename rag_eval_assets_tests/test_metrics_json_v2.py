"""Seed 003's JSON v2 score by hand: bigram Jaccard on Chinese text, list F1 with the padding caps, evidence
keywords, grounding against the retrieved contexts, the weighted total, schema failures and the dev gate."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval_assets.metrics.json_v2 import (
    GateResult,
    JsonV2Score,
    bigram_jaccard,
    dev_gate,
    evidence_score,
    fuzzy_match,
    grounding,
    keywords,
    list_f1,
    score_json_v2,
)

EXPECTED = {
    "target_audience": "新進維運工程師",
    "main_topic": "資料庫備份",
    "sub_topic": "每天凌晨兩點自動執行資料庫增量備份",
    "detailed_description": ["備份檔保存三十天", "備份失敗時發送告警郵件", "每週日執行一次完整備份"],
    "original_evidence": "依據維運手冊：資料庫每天凌晨兩點自動執行增量備份，備份檔保存三十天，失敗時 alert on-call。",
    "predicted_questions": ["資料庫多久備份一次？", "備份檔保存多久？"],
}
CONTEXTS = [
    {"source_path": "ops/backup.md", "text": "資料庫每天凌晨兩點自動執行\n增量備份，備份檔保存三十天。"},
    {"source_path": "ops/alerts.md", "text": "Backup failures page the on-call engineer."},
]
WITHOUT_SUB_TOPIC = {k: v for k, v in EXPECTED.items() if k != "sub_topic"}
SOURCE_MAP = [{"refs": [{"file": "ops/backup.md", "anchors": ["凌晨兩點自動執行增量備份"]}]}]


def answer(**changes) -> str:
    return json.dumps({**EXPECTED, "source_map": SOURCE_MAP, **changes}, ensure_ascii=False)


def test_bigram_jaccard_by_hand() -> None:
    # 每日,日增,增量,量備,備份,份流,流程 vs 每日,日增,增量,量備,備份,份步,步驟: 5 shared of 9
    assert bigram_jaccard("每日增量備份流程", "每日增量備份步驟") == pytest.approx(5 / 9)
    # one character changed in 12: 晨兩,兩點 vs 晨三,三點 -> 9 shared of 13 = 0.692, below 0.72
    assert bigram_jaccard("每天凌晨兩點執行增量備份", "每天凌晨三點執行增量備份") == pytest.approx(9 / 13)
    # the same change in 17 distinct characters: 14 shared of 18 = 0.778, above 0.72
    long_a, long_b = "每天凌晨兩點自動執行資料庫增量備份", "每天凌晨三點自動執行資料庫增量備份"
    assert bigram_jaccard(long_a, long_b) == pytest.approx(14 / 18)
    assert bigram_jaccard("a", "a") == 1.0
    assert bigram_jaccard("ab", "cd") == 0.0


@pytest.mark.parametrize(
    ("expected", "got", "match"),
    [
        ("每天凌晨兩點自動執行資料庫增量備份", "每天凌晨三點自動執行資料庫增量備份", True),  # Jaccard 14/18
        ("每天凌晨兩點執行增量備份", "每天凌晨三點執行增量備份", False),  # Jaccard 9/13
        ("資料庫備份", "資料庫備份策略與流程", True),  # substring
        ("資料庫備份策略", "備份策略", True),  # substring the other way
        ("資料 庫\n備份", "資料庫備份", True),  # whitespace removed first
        ("junior engineers", "junior  engineer", True),
        ("", "資料庫", False),  # the empty string is in everything and matches nothing
        ("  ", "  ", False),
    ],
)
def test_fuzzy_match(expected: str, got: str, match: bool) -> None:
    assert fuzzy_match(expected, got) is match


def test_list_f1_by_hand() -> None:
    expected = ["備份檔保存三十天", "備份失敗時發送告警郵件", "每週日執行一次完整備份"]
    got = ["備份檔保存 三十天", "失敗時發送告警郵件", "天氣晴朗", "午餐吃麵"]
    # recall = 2/3 (third expected item unmatched), precision = 2/4 -> F1 = 2 * (2/3 * 1/2) / (2/3 + 1/2) = 4/7
    assert list_f1(expected, got) == pytest.approx(4 / 7)
    assert list_f1([], []) == 1.0
    assert list_f1(expected, []) == 0.0
    assert list_f1([], ["多餘"]) == 0.0
    assert list_f1(["", " "], []) == 1.0  # blank items are no items


def test_keywords_english_tokens_and_chinese_bigrams_in_order() -> None:
    text = "Backup runs at 02:00 daily (a.m.)；備份檔保存三十天，失敗時 alert backup"
    assert keywords(text) == [
        "backup", "runs", "at", "02", "00", "daily",  # "a" and "m" are shorter than 2
        "備份", "份檔", "檔保", "保存", "存三", "三十", "十天",
        "失敗", "敗時",  # no bigram across "，"
        "alert",  # "backup" again: kept once
    ]  # fmt: skip


def test_evidence_score_by_hand() -> None:
    expected = "Backup runs at 02:00 daily；備份檔保存三十天"  # 13 keywords
    # got keywords hit: backup, daily, 保存, 三十 -> 4 hits -> min(1, 4/8) = 0.5; 20 characters -> 20/40
    got = "daily backup 保存 三十 "
    got = got + "x" * (20 - len(got))
    assert len(got) == 20
    assert evidence_score(expected, got) == pytest.approx(0.5 * 0.5)
    # 8 or more hits and 40 characters: full marks
    full = "backup runs at 02 00 daily 備份檔保存三十天" + "." * 10
    assert len(full) >= 40
    assert evidence_score(expected, full) == 1.0
    assert evidence_score(expected, "") == 0.0


def test_only_the_first_30_expected_keywords_count() -> None:
    expected = " ".join(f"w{i:02d}" for i in range(40))
    late = " ".join(f"w{i:02d}" for i in range(30, 40)) + " padding padding padding"
    early = " ".join(f"w{i:02d}" for i in range(22, 30)) + " padding padding padding"
    assert evidence_score(expected, late) == 0.0
    assert evidence_score(expected, early) == 1.0


def test_grounding_by_hand() -> None:
    source_map = [
        {
            "refs": [
                # ok: the 2nd anchor, found across the context's line break
                {"file": "ops/backup.md", "anchors": ["不存在的句子", "執行增量備份"]},
                {"file": "ops/other.md", "anchors": ["執行增量備份"]},  # file not retrieved
            ]
        },
        {"file": "ops/alerts.md", "page": 2, "anchors": ["page the on-call"]},  # flat entry, ok
        {"file": "ops/backup.md", "anchors": ["保存六十天"]},  # anchor not in context
        "not an object",  # counts, not ok
    ]
    assert grounding(source_map, CONTEXTS) == pytest.approx(2 / 5)
    assert grounding([], CONTEXTS) == 0.0
    assert grounding([{"refs": []}], CONTEXTS) == 0.0
    assert grounding(SOURCE_MAP, []) == 0.0


def test_grounding_caps_entries_refs_and_anchors() -> None:
    bad = {"file": "ops/backup.md", "anchors": ["不存在"]}
    good = {"file": "ops/backup.md", "anchors": ["增量備份"]}
    # the 13th entry is not looked at: 0 of 12
    assert grounding([bad] * 12 + [good], CONTEXTS) == 0.0
    # the 7th ref of an entry is not looked at: 0 of 6
    assert grounding([{"refs": [bad] * 6 + [good]}], CONTEXTS) == 0.0
    # the 7th anchor of a ref is not looked at
    assert grounding([{"file": "ops/backup.md", "anchors": ["不存在"] * 6 + ["增量備份"]}], CONTEXTS) == 0.0
    assert grounding([{"file": "ops/backup.md", "anchors": ["不存在"] * 5 + ["增量備份"]}], CONTEXTS) == 1.0


def test_perfect_answer_scores_100() -> None:
    score = score_json_v2(EXPECTED, "\n  " + answer() + "\n", CONTEXTS)
    assert score.schema_ok
    assert score.parts == {
        "target_audience": 1.0,
        "main_topic": 1.0,
        "sub_topic": 1.0,
        "detailed_description_f1": 1.0,
        "original_evidence": 1.0,
        "predicted_questions_f1": 1.0,
        "grounding": 1.0,
    }
    assert (score.total, score.score) == (1.0, 100.0)


def test_weighted_total_by_hand() -> None:
    got = answer(
        target_audience="財務部門",  # 0
        sub_topic="每天凌晨三點自動執行資料庫增量備份",  # 1 (Jaccard 14/18)
        detailed_description=["備份檔保存三十天", "天氣晴朗"],  # recall 1/3, precision 1/2 -> F1 0.4
        original_evidence="依據維運手冊",  # keywords 依據,據維,維運,運手,手冊: 5 hits -> 5/8; 6 chars -> 6/40
        predicted_questions=["資料庫多久備份一次？"],  # recall 1/2, precision 1 -> F1 2/3
        source_map=[{"file": "ops/backup.md", "anchors": ["增量備份"]}, {"file": "x.md", "anchors": ["增量備份"]}],
    )
    score = score_json_v2(EXPECTED, got, CONTEXTS)
    parts = {
        "target_audience": 0.0,
        "main_topic": 1.0,
        "sub_topic": 1.0,
        "detailed_description_f1": 0.4,
        "original_evidence": 5 / 8 * 6 / 40,
        "predicted_questions_f1": 2 / 3,
        "grounding": 0.5,
    }
    assert score.parts == pytest.approx(parts)
    total = 0.1 * 0 + 0.1 * 1 + 0.1 * 1 + 0.3 * 0.4 + 0.2 * (5 / 8 * 6 / 40) + 0.1 * 2 / 3 + 0.1 * 0.5
    assert score.total == pytest.approx(total)
    assert score.score == pytest.approx(100 * total)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("```json\n" + answer() + "\n```", "not valid JSON"),
        ("Here is the answer: " + answer(), "not valid JSON"),
        (answer()[:-1], "not valid JSON"),
        (json.dumps([EXPECTED]), "not a JSON object but list"),
        (json.dumps({**WITHOUT_SUB_TOPIC, "source_map": []}), "missing field 'sub_topic'"),
        (json.dumps(EXPECTED, ensure_ascii=False), "missing field 'source_map'"),
        (answer(detailed_description="備份檔保存三十天"), "'detailed_description' is not a list of strings"),
        (answer(predicted_questions=["ok", 3]), "'predicted_questions' is not a list of strings"),
        (answer(main_topic=None), "'main_topic' is not a string"),
        (answer(source_map={"file": "ops/backup.md"}), "'source_map' is not a list"),
    ],
)
def test_schema_failures_score_zero(text: str, error: str) -> None:
    score = score_json_v2(EXPECTED, text, CONTEXTS)
    assert (score.schema_ok, score.total, score.score, score.parts) == (False, 0.0, 0.0, {})
    assert error in score.schema_error


def test_extra_keys_and_over_long_lists_are_not_schema_failures() -> None:
    got = answer(notes="extra", predicted_questions=EXPECTED["predicted_questions"] * 4)
    score = score_json_v2(EXPECTED, got, CONTEXTS)
    assert score.schema_ok and score.score == 100.0


def test_padding_past_the_caps_is_ignored() -> None:
    junk = [f"無關內容{i}號" for i in range(12)]
    # the only matching item sits at index 12 (description) / 10 (questions): outside the slice that is scored
    late_description = answer(detailed_description=junk + EXPECTED["detailed_description"])
    late_questions = answer(predicted_questions=junk[:10] + EXPECTED["predicted_questions"])
    assert score_json_v2(EXPECTED, late_description, CONTEXTS).parts["detailed_description_f1"] == 0.0
    assert score_json_v2(EXPECTED, late_questions, CONTEXTS).parts["predicted_questions_f1"] == 0.0


def test_dev_gate() -> None:
    perfect = JsonV2Score(schema_ok=True, parts={}, total=1.0, score=100.0)
    broken = JsonV2Score(schema_ok=False)
    # 49 * 100 / 50 = 98 >= 95 and 49/50 = 0.98 >= 0.98
    assert dev_gate([perfect] * 49 + [broken]) == GateResult(True, 98.0, 0.98, 50)
    # 48/50 = 0.96 < 0.98 although 96 >= 95
    assert dev_gate([perfect] * 48 + [broken] * 2).passed is False
    # every answer valid, mean 94 < 95
    ninety_four = JsonV2Score(schema_ok=True, parts={}, total=0.94, score=94.0)
    assert dev_gate([ninety_four] * 10).passed is False
    empty = dev_gate([])
    assert (empty.passed, empty.n) == (False, 0)


# Chinese items from a small alphabet so that matches happen; junk from Latin letters that never occur in them.
HAN = "資料庫備份每天凌晨兩點執行增量保存三十天失敗告警"
items = st.text(alphabet=HAN, min_size=1, max_size=10)
junk_items = st.text(alphabet="qwxz", min_size=3, max_size=8)


@settings(max_examples=150)
@given(
    expected=st.lists(items, max_size=6),
    got=st.lists(items, max_size=14),
    junk=st.lists(junk_items, min_size=1, max_size=15),
)
def test_list_f1_bounds_and_padding(expected: list[str], got: list[str], junk: list[str]) -> None:
    f1 = list_f1(expected, got[:12])
    assert 0.0 <= f1 <= 1.0
    # junk that matches nothing never raises the score, wherever it is appended
    assert list_f1(expected, (got + junk)[:12]) <= f1 + 1e-12
    if len(got) >= 12:
        # past the cap nothing changes, junk or not
        assert list_f1(expected, (got + junk + expected)[:12]) == f1


@settings(max_examples=100)
@given(
    description=st.lists(items, max_size=14),
    questions=st.lists(items, max_size=12),
    evidence=st.text(alphabet=HAN + "abc ", max_size=60),
    topic=items,
    extra=st.lists(junk_items, min_size=13, max_size=20),
)
def test_total_bounds_and_caps(description, questions, evidence, topic, extra) -> None:
    got = json.loads(answer(detailed_description=description, predicted_questions=questions))
    got["original_evidence"], got["main_topic"] = evidence, topic
    score = score_json_v2(EXPECTED, json.dumps(got, ensure_ascii=False), CONTEXTS)
    assert score.schema_ok and 0.0 <= score.score <= 100.0
    assert all(0.0 <= v <= 1.0 for v in score.parts.values())
    padded = dict(got, detailed_description=description + extra, predicted_questions=questions + extra)
    padded_score = score_json_v2(EXPECTED, json.dumps(padded, ensure_ascii=False), CONTEXTS)
    assert padded_score.score <= score.score + 1e-9
    # with at least 12 (10) items already, more than 12 appended items change nothing
    full = dict(got, detailed_description=(description + extra)[:12], predicted_questions=(questions + extra)[:10])
    full_score = score_json_v2(EXPECTED, json.dumps(full, ensure_ascii=False), CONTEXTS)
    longer = dict(full, detailed_description=full["detailed_description"] + extra + EXPECTED["detailed_description"])
    longer["predicted_questions"] = full["predicted_questions"] + extra + EXPECTED["predicted_questions"]
    assert score_json_v2(EXPECTED, json.dumps(longer, ensure_ascii=False), CONTEXTS).score == full_score.score


def test_an_empty_or_abstained_answer_scores_zero_unless_abstention_is_expected() -> None:
    empty = score_json_v2(EXPECTED, "  ", CONTEXTS)
    assert (empty.schema_ok, empty.score, empty.parts) == (False, 0.0, {})
    # A perfect object that came with abstained: true is no answer either.
    abstained = score_json_v2(EXPECTED, answer(), CONTEXTS, abstained=True)
    assert (abstained.schema_ok, abstained.score, abstained.parts) == (False, 0.0, {})
    assert abstained.schema_error == "no answer: the answer abstained"
    expected = score_json_v2(EXPECTED, "", CONTEXTS, abstained=True, abstention_expected=True)
    assert (expected.schema_ok, expected.total, expected.score) == (True, 1.0, 100.0)
    assert set(expected.parts.values()) == {1.0} and len(expected.parts) == 7
