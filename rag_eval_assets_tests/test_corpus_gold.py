from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import GOLD_COLUMNS, resolve_gold, resolve_gold_report
from rag_eval_assets.corpus.load import load_corpus
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
    gold, report = resolve_gold_report(questions, chunks)

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

    assert report == {
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
    with pytest.raises(InputError, match=r"no document has id\(s\) \['3'\]"):
        resolve_gold([judged_empty], chunks)
    gold, report = resolve_gold_report([judged_empty], chunks, corpus_doc_ids=[d.doc_id for d in docs])
    assert gold["doc_id"].tolist() == ["4"]
    assert report["empty_doc_refs"] == 1


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
        ("eval.jsonl", 7, "gold_doc_ids"),
        ("eval.jsonl", 7, "gold_chunk_ids"),
        ("eval.jsonl", 9, "source_map[0]"),
        ("eval.jsonl", 9, "source_map[1]"),
        ("eval.jsonl", 9, "source_map[2]"),
        ("eval.jsonl", 12, "qrels"),
    ]
    messages = [p.message for p in raised.value.problems]
    assert "'Software/Missing.md'" in messages[0]
    assert "heading_path 'Go'" in messages[1]
    assert "never written" in messages[2]
    assert "['nope.md']" in messages[3]
    assert "['feedfacefeedface']" in messages[4]
    assert "ambiguous" in messages[5] and "中文/说明.txt" in messages[5]
    assert "page 4" in messages[6]
    assert "no such words" in messages[7]
    assert "['ghost']" in messages[8]


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
        gold, report = resolve_gold_report(questions, chunks)
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
