from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import (
    GOLD_COLUMNS,
    UnresolvedGold,
    resolve_gold,
    resolve_gold_report,
    unresolved_summary,
    with_resolved_support_groups,
)
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.schema import GoldSupport, Question, SourceRef
from rag_eval_assets_tests.test_corpus_pdf import write_pdf

FIXTURES = Path(__file__).parent / "fixtures" / "corpus"
LEETCODE = "Software/LeetCode Tips.md"
TAXES = "Налоги/Вычеты.md"
CHINESE = "中文/说明.txt"
REPORT = "reports/annual.pdf"
REPORT_PAGES = (
    "Annual report 2023. Revenue was 12 million dollars, up from 9 million in 2022. The growth came from the "
    "new subscription product, which now brings in a third of all revenue. Costs grew more slowly than revenue.",
    "Risks. The main risk is currency exposure, because most costs are in euros while most revenue is in "
    "dollars. Hedging covers half of that exposure for the next twelve months. A second risk is the dependence "
    "on two large customers, who together account for forty percent of revenue.",
    "Outlook. Growth is expected to continue in 2024, with revenue between 14 and 15 million dollars.",
)
SIZES = (ChunkerParams(200, 40), ChunkerParams(500, 80), ChunkerParams(1200, 150))


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture vault plus a three-page PDF (generated: no binary files are committed)."""
    root = tmp_path_factory.mktemp("corpus") / "vault"
    shutil.copytree(FIXTURES / "vault", root)
    (root / "reports").mkdir()
    write_pdf(root / REPORT, REPORT_PAGES)
    return root


@pytest.fixture(scope="module")
def chunks(corpus_root: Path) -> pd.DataFrame:
    return chunk_documents(load_corpus(corpus_root), "vault", ChunkerParams(200, 40))


def _q(qid: str, line: int, **fields: object) -> Question:
    return Question(
        id=qid, question=f"question {qid}", format="seed002", source_file="eval.jsonl", source_line=line, **fields
    )


def _ids(chunks: pd.DataFrame, mask: pd.Series) -> list[str]:
    return chunks.loc[mask, "chunk_id"].tolist()


def test_gold_supports_match_path_heading_prefix_and_snippets(chunks: pd.DataFrame) -> None:
    in_file = chunks["rel_path"] == LEETCODE
    questions = [
        _q(
            "snippets",
            1,
            gold_supports=(
                GoldSupport(LEETCODE, "# Golang Tips & Oddities", ("NO BUILT IN\n  string sort", "not in the note")),
                GoldSupport(LEETCODE, "Golang Tips & Oddities > ## Maps", ()),
            ),
        ),
        _q("heading prefix", 2, gold_supports=(GoldSupport(LEETCODE, "# Python Tips"),)),
        _q("whole file", 3, gold_supports=(GoldSupport(LEETCODE, ""),)),
    ]
    gold = resolve_gold(questions, chunks)
    assert list(gold.columns) == list(GOLD_COLUMNS)
    assert set(gold["source"]) == {"gold_supports"}
    assert set(gold["grade"]) == {1}

    snippets = gold[gold["query_id"] == "snippets"]
    with_snippet = in_file & chunks["text"].str.contains("no built in string sort")
    assert snippets.loc[snippets["support_index"] == 0, "chunk_id"].tolist() == _ids(chunks, with_snippet)
    maps = in_file & (chunks["heading_path"] == "Golang Tips & Oddities > Maps")
    assert snippets.loc[snippets["support_index"] == 1, "chunk_id"].tolist() == _ids(chunks, maps)

    python = in_file & chunks["heading_path"].isin(["Python Tips", "Python Tips > Default arguments"])
    assert gold.loc[gold["query_id"] == "heading prefix", "chunk_id"].tolist() == _ids(chunks, python)
    assert gold.loc[gold["query_id"] == "whole file", "chunk_id"].tolist() == _ids(chunks, in_file)
    assert set(gold["doc_id"]) == {LEETCODE}


def test_doc_ids_chunk_ids_and_source_map(chunks: pd.DataFrame) -> None:
    one_chunk = chunks[chunks["rel_path"] == TAXES].iloc[1]
    questions = [
        _q("docs", 1, gold_doc_ids=(TAXES, CHINESE, TAXES)),
        _q("chunks", 2, gold_chunk_ids=(one_chunk["chunk_id"],)),
        _q(
            "source map",
            3,
            source_map=(
                SourceRef(REPORT, 2, ("CURRENCY   exposure",)),
                SourceRef("说明.txt", None, ("固定分块大小",)),  # base name of 中文/说明.txt
                SourceRef(REPORT, 3, ()),
            ),
        ),
    ]
    resolution = resolve_gold_report(questions, chunks)
    gold = resolution.gold

    docs = gold[gold["query_id"] == "docs"]
    assert docs["chunk_id"].tolist() == _ids(chunks, chunks["doc_id"].isin([TAXES, CHINESE]))  # each chunk once
    assert set(docs["support_index"]) == {-1}

    assert gold[gold["query_id"] == "chunks"][["chunk_id", "doc_id", "source", "support_index"]].values.tolist() == [
        [one_chunk["chunk_id"], TAXES, "gold_chunk_ids", -1]
    ]

    source_map = gold[gold["query_id"] == "source map"]
    page2 = (chunks["rel_path"] == REPORT) & (chunks["page"] == 2)
    flat_text = chunks["text"].str.replace(r"\s+", " ", regex=True)
    expected = _ids(chunks, page2 & flat_text.str.contains("currency exposure"))
    assert expected and source_map.loc[source_map["support_index"] == 0, "chunk_id"].tolist() == expected
    chinese = (chunks["rel_path"] == CHINESE) & chunks["text"].str.contains("固定分块大小")
    assert source_map.loc[source_map["support_index"] == 1, "chunk_id"].tolist() == _ids(chunks, chinese)
    page3 = (chunks["rel_path"] == REPORT) & (chunks["page"] == 3)
    assert source_map.loc[source_map["support_index"] == 2, "chunk_id"].tolist() == _ids(chunks, page3)

    assert resolution.unresolved == [] and resolution.unscored == []
    assert resolution.counts == {
        "gold_supports": 0,
        "source_map": len(source_map),
        "gold_doc_ids": len(docs),
        "gold_chunk_ids": 1,
        "qrels": 0,
        "stale_chunk_ids": 0,
        "empty_doc_refs": 0,
    }


def test_qrels_keep_their_grade_and_empty_documents_are_counted() -> None:
    docs = load_corpus(FIXTURES / "beir")
    chunks = chunk_documents(docs, "beir", ChunkerParams())
    question = Question(id="1", question="slipstream", format="beir", qrels={"1": 2, "2": 1, "4": 0})
    gold = resolve_gold([question], chunks)
    assert gold[["query_id", "doc_id", "grade", "support_index", "source"]].values.tolist() == [
        ["1", "1", 2, -1, "qrels"],
        ["1", "2", 1, -1, "qrels"],
    ]

    judged_empty = Question(id="2", question="q", format="beir", qrels={"3": 1, "4": 1})
    with pytest.raises(InputError, match=r"no document has id '3' \(judged with grade 1\)"):
        resolve_gold([judged_empty], chunks)
    resolution = resolve_gold_report([judged_empty], chunks, corpus_doc_ids=[d.doc_id for d in docs])
    assert resolution.gold["doc_id"].tolist() == ["4"]
    assert resolution.counts["empty_doc_refs"] == 1 and resolution.unresolved == []


def test_negative_questions_have_no_rows(chunks: pd.DataFrame) -> None:
    questions = [
        _q("unanswerable", 1, answerable=False, gold_doc_ids=("missing.md",)),
        _q("negative", 2, type="negative", gold_chunk_ids=("0000000000000000",)),
    ]
    gold = resolve_gold(questions, chunks)
    assert gold.empty and list(gold.columns) == list(GOLD_COLUMNS)
    assert resolve_gold([], chunks).empty


def test_every_unresolved_label_is_reported_at_once(corpus_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(corpus_root, root)
    (root / "copy").mkdir()
    shutil.copy(root / CHINESE, root / "copy" / "说明.txt")  # a second file with that base name: ambiguous
    two_chinese = chunk_documents(load_corpus(root), "vault", ChunkerParams(200, 40))
    questions = [
        _q(
            "supports",
            4,
            gold_supports=(
                GoldSupport(LEETCODE, "Golang Tips & Oddities"),
                GoldSupport("Software/Missing.md", ""),
                GoldSupport(LEETCODE, "Go"),
                GoldSupport(LEETCODE, "Python Tips", ("never written",)),
            ),
        ),
        _q("docs", 7, gold_doc_ids=(TAXES, "nope.md"), gold_chunk_ids=("feedfacefeedface",)),
        _q(
            "source map",
            9,
            source_map=(SourceRef("说明.txt"), SourceRef(REPORT, 4), SourceRef(REPORT, 1, ("no such words",))),
        ),
        _q("qrels", 12, qrels={"ghost": 1, "zero": 0}),
    ]
    with pytest.raises(InputError) as raised:
        resolve_gold(questions, two_chinese)
    got = [(p.file, p.line, p.field) for p in raised.value.problems]
    assert got == [
        ("eval.jsonl", 4, "gold_supports[1]"),
        ("eval.jsonl", 4, "gold_supports[2]"),
        ("eval.jsonl", 4, "gold_supports[3]"),
        ("eval.jsonl", 7, "gold_doc_ids[1]"),
        ("eval.jsonl", 7, "gold_chunk_ids[0]"),
        ("eval.jsonl", 9, "source_map[0]"),
        ("eval.jsonl", 9, "source_map[1]"),
        ("eval.jsonl", 9, "source_map[2]"),
        ("eval.jsonl", 12, "qrels"),
    ]
    messages = [p.message for p in raised.value.problems]
    assert "'Software/Missing.md'" in messages[0]
    assert "heading_path 'Go'" in messages[1]
    assert "never written" in messages[2]
    assert "'nope.md'" in messages[3]
    assert "'feedfacefeedface'" in messages[4]
    assert "ambiguous" in messages[5] and "中文/说明.txt" in messages[5]
    assert "page 4" in messages[6]
    assert "no such words" in messages[7]
    assert "'ghost'" in messages[8]


def test_snippet_cut_by_a_chunk_boundary_is_explained(corpus_root: Path, chunks: pd.DataFrame) -> None:
    golang = chunks[(chunks["rel_path"] == LEETCODE) & (chunks["heading_path"] == "Golang Tips & Oddities")]
    (_, first_end), (second_start, _) = golang[["char_start", "char_end"]].values.tolist()[:2]
    # From just before the second chunk starts to just after the first ends: in neither whole.
    across = (corpus_root / LEETCODE).read_text(encoding="utf-8")[second_start - 5 : first_end + 5]
    question = _q("cut", 1, gold_supports=(GoldSupport(LEETCODE, "Golang Tips & Oddities", (across,)),))
    with pytest.raises(InputError, match="cross a chunk boundary"):
        resolve_gold([question], chunks)


def test_anchored_labels_survive_rechunking_and_chunk_ids_go_stale(corpus_root: Path) -> None:
    """THE re-chunking test: anchors resolve at every chunk size; chunk ids from the first do not."""
    docs = load_corpus(corpus_root)
    by_size = [chunk_documents(docs, "vault", params) for params in SIZES]
    first = by_size[0]

    def first_ids(rel_path: str, needle: str) -> tuple[str, ...]:
        """Chunk ids at the first size, as a labeller clicking through results would have saved them."""
        return tuple(first.loc[(first["rel_path"] == rel_path) & first["text"].str.contains(needle), "chunk_id"])

    questions = [
        _q(
            "go",
            1,
            gold_supports=(
                GoldSupport(LEETCODE, "# Golang Tips & Oddities", ("no built in string sort",)),
                GoldSupport(LEETCODE, "Golang Tips & Oddities", ("strings.Builder", "sort.Slice")),
            ),
            gold_chunk_ids=first_ids(LEETCODE, "strings.Builder"),
        ),
        _q(
            "tax",
            2,
            gold_supports=(GoldSupport(TAXES, "Налоговые вычеты > Имущественный вычет", ("три миллиона рублей",)),),
            gold_chunk_ids=first_ids(TAXES, "три миллиона"),
        ),
        _q(
            "risk",
            3,
            source_map=(SourceRef(REPORT, 2, ("forty percent of revenue",)), SourceRef("说明.txt", None, ("冻结",))),
            gold_chunk_ids=first_ids(REPORT, "forty percent") + first_ids(CHINESE, "冻结"),
        ),
        _q("python", 4, gold_supports=(GoldSupport(LEETCODE, "Python Tips"),)),
    ]
    anchored = {
        (q.id, source, i)
        for q in questions
        for source, labels in (("gold_supports", q.gold_supports), ("source_map", q.source_map))
        for i in range(len(labels))
    }
    saved_ids = {c for q in questions for c in q.gold_chunk_ids}
    assert all(q.gold_chunk_ids for q in questions[:3])

    for params, chunks in zip(SIZES, by_size):
        resolution = resolve_gold_report(questions, chunks)
        gold, report = resolution.gold, resolution.counts
        assert resolution.unresolved == []  # stale ids of anchored questions are counted, not unresolved
        resolved = set(gold[["query_id", "source", "support_index"]].itertuples(index=False, name=None))
        assert anchored <= resolved, f"an anchored label found no chunk at {params}"

        stale = saved_ids - set(chunks["chunk_id"])
        assert report["stale_chunk_ids"] == len(stale)
        assert set(gold.loc[gold["source"] == "gold_chunk_ids", "chunk_id"]) == saved_ids - stale
        if params == SIZES[0]:
            assert not stale
        else:
            assert stale, f"expected re-chunking at {params} to change the saved chunk ids"
            # Without anchors, the same stale ids are an error, not silently dropped.
            bare = [_q("bare", 9, gold_chunk_ids=tuple(sorted(stale)))]
            with pytest.raises(InputError, match="no chunk has id"):
                resolve_gold(bare, chunks)


def _edited_vault(corpus_root: Path, tmp_path: Path) -> pd.DataFrame:
    """The vault after an author renamed the tax note and the Golang heading: labels written before go stale."""
    root = tmp_path / "vault"
    shutil.copytree(corpus_root, root)
    (root / TAXES).rename(root / "Налоги/Вычеты 2024.md")
    note = root / LEETCODE
    text = note.read_text(encoding="utf-8")
    note.write_text(text.replace("# Golang Tips & Oddities", "# Go Tips"), encoding="utf-8")
    return chunk_documents(load_corpus(root), "vault", ChunkerParams(200, 40))


def test_stale_gold_supports_are_listed_and_the_rest_still_resolves(
    corpus_root: Path, chunks: pd.DataFrame, tmp_path: Path
) -> None:
    questions = [
        _q(
            "partly",
            1,
            gold_supports=(
                GoldSupport(LEETCODE, "Python Tips", ("default",)),
                GoldSupport(TAXES, "Налоговые вычеты > Имущественный вычет", ("три миллиона рублей",)),
                GoldSupport(LEETCODE, "# Golang Tips & Oddities", ("no built in string sort",)),
            ),
            required_support_groups=((0, 1), (2,)),
        ),
        _q("gone", 2, gold_supports=(GoldSupport(TAXES, ""),), required_support_groups=((0,),)),
    ]
    before = resolve_gold_report(questions, chunks, strict=False)
    assert before.unresolved == [] and set(before.gold["support_index"]) == {0, 1, 2}

    edited = _edited_vault(corpus_root, tmp_path)
    with pytest.raises(InputError):  # strict, as `rag-eval export-qrels` resolves
        resolve_gold(questions, edited)
    after = resolve_gold_report(questions, edited, strict=False)
    assert after.unresolved == [
        UnresolvedGold("partly", "gold_supports[1]", f"rel_path {TAXES!r} names no document with chunks",
                       "eval.jsonl", 1),
        UnresolvedGold("partly", "gold_supports[2]",
                       f"no chunk of {LEETCODE!r} is under heading_path '# Golang Tips & Oddities'", "eval.jsonl", 1),
        UnresolvedGold("gone", "gold_supports[0]", f"rel_path {TAXES!r} names no document with chunks",
                       "eval.jsonl", 2),
    ]
    # What resolved is scored as before: the Python support's chunks, exactly.
    partly = after.gold[after.gold["query_id"] == "partly"]
    python = before.gold[(before.gold["query_id"] == "partly") & (before.gold["support_index"] == 0)]
    assert set(partly["support_index"]) == {0}
    assert sorted(partly["chunk_id"]) == sorted(python["chunk_id"])
    assert after.unscored == ["gone"]

    # recall_all's groups keep only resolved supports: (0, 1) needs 0 alone now, (2,) is gone, and "gone" falls back
    # to the default (no groups).
    narrowed = with_resolved_support_groups(questions, after.gold)
    assert [q.required_support_groups for q in narrowed] == [((0,),), None]
    assert with_resolved_support_groups(questions, before.gold) == questions

    document = after.unresolved_document()
    assert json.loads(json.dumps(document)) == document
    assert document["unscored_questions"] == ["gone"]
    assert unresolved_summary(document) == (
        "3 gold labels of 2 questions resolve to nothing in the corpus. Each question is scored on the labels that "
        "did resolve; 1 question with no resolved label at all (gone) is left out of every metric that needs gold "
        "(the retrieval metrics among them), as unlabelled questions are."
    )


def test_stale_chunk_ids_without_anchors_are_listed_one_by_one(corpus_root: Path) -> None:
    docs = load_corpus(corpus_root)
    first, second = (chunk_documents(docs, "vault", params) for params in SIZES[:2])
    taxes = first.loc[first["rel_path"] == TAXES, "chunk_id"].tolist()
    kept = sorted(set(taxes) & set(second["chunk_id"]))
    stale = [c for c in taxes if c not in set(second["chunk_id"])]
    assert kept and len(stale) >= 2, "the sizes must keep one tax chunk id and change others"
    questions = [
        _q("mixed", 3, gold_chunk_ids=(stale[0], kept[0], stale[1])),
        _q("all stale", 4, gold_chunk_ids=tuple(stale)),
        _q("anchored", 5, gold_supports=(GoldSupport(TAXES, ""),), gold_chunk_ids=tuple(stale)),
    ]
    resolution = resolve_gold_report(questions, second, strict=False)
    assert [(u.query_id, u.support, u.why, u.line) for u in resolution.unresolved] == [
        ("mixed", "gold_chunk_ids[0]", f"no chunk has id {stale[0]!r}", 3),
        ("mixed", "gold_chunk_ids[2]", f"no chunk has id {stale[1]!r}", 3),
        *[("all stale", f"gold_chunk_ids[{i}]", f"no chunk has id {c!r}", 4) for i, c in enumerate(stale)],
    ]
    gold = resolution.gold
    assert gold.loc[gold["query_id"] == "mixed", "chunk_id"].tolist() == [kept[0]]
    assert resolution.unscored == ["all stale"]
    # Anchors that resolve make the question's stale chunk ids a re-chunking artefact: counted, not listed.
    assert resolution.counts["stale_chunk_ids"] == len(stale)


def test_stale_seed003_source_map_entries_are_listed(corpus_root: Path, tmp_path: Path) -> None:
    def entry(question: str, source_map: list[dict]) -> dict:
        answer = {"target_audience": "staff", "main_topic": "report", "sub_topic": "risks",
                  "detailed_description": ["-"], "original_evidence": "-", "predicted_questions": ["-"]}
        return {"question": question, "expected": {"answer_example": answer, "source_map": source_map}}

    path = tmp_path / "question_v2.json"
    path.write_text(json.dumps([
        entry("What are the risks?", [
            {"file": REPORT, "page": 2, "anchors": ["currency exposure"]},
            {"file": "reports/annual-2023.pdf", "anchors": ["currency exposure"]},  # the file was renamed
            {"refs": [{"file": REPORT, "page": 4}]},  # the report has three pages
        ]),
        entry("What is frozen?", [{"file": "说明.txt", "anchors": ["a sentence that was rewritten"]}]),
    ], ensure_ascii=False), encoding="utf-8")
    questions = load_evalset(path, "seed003")
    chunks = chunk_documents(load_corpus(corpus_root), "vault", ChunkerParams(200, 40))

    resolution = resolve_gold_report(questions, chunks, strict=False)
    assert [(u.query_id, u.support, u.file, u.line) for u in resolution.unresolved] == [
        ("q0000", "source_map[1]", str(path), 0),
        ("q0000", "source_map[2]", str(path), 0),
        ("q0001", "source_map[0]", str(path), 1),
    ]
    whys = [u.why for u in resolution.unresolved]
    assert whys[0] == "file 'reports/annual-2023.pdf' names no document with chunks"
    assert whys[1] == f"no chunk of {REPORT!r} is on page 4"
    assert "a sentence that was rewritten" in whys[2] and CHINESE in whys[2]
    page2 = (chunks["rel_path"] == REPORT) & (chunks["page"] == 2)
    flat_text = chunks["text"].str.replace(r"\s+", " ", regex=True)
    expected = _ids(chunks, page2 & flat_text.str.contains("currency exposure"))
    assert resolution.gold[["query_id", "support_index"]].drop_duplicates().values.tolist() == [["q0000", 0]]
    assert resolution.gold["chunk_id"].tolist() == expected
    assert resolution.unscored == ["q0001"]
