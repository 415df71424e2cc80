"""The labeler's plain-Python parts: snippets, merging labels into lines, saving, resolution, --only failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import resolve_gold
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.labeling.candidates import Candidate
from rag_eval_assets.labeling.evalset_file import rewrite_lines, save_records
from rag_eval_assets.labeling.labels import updated_record
from rag_eval_assets.labeling.resolution import ResolutionCheck, check_sizes
from rag_eval_assets.labeling.selection import failing_ids
from rag_eval_assets.labeling.snippets import choose_snippets
from rag_eval_assets_tests.label_helpers import bm25_source
from rag_eval_assets_tests.sample_config import SAMPLE

NOTE = "notes/Operations/Night Shift.md"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory):
    built = bm25_source(tmp_path_factory.mktemp("config"))
    yield built
    built.close()


def _candidate(rank: int, text: str, heading: str = "# Night Shift Procedures", chunk_id: str | None = None,
               rel_path: str = NOTE) -> Candidate:
    return Candidate(rank, chunk_id or f"c{rank}", rel_path, rel_path, heading, None, text, 1.0, ())


def test_snippets_occur_once_and_avoid_the_neighbours_overlap() -> None:
    text = ("Sustained wind must be below 15 m/s and gusts below 20 m/s. The rain sensor must report "
            "no precipitation for 30 minutes. The rain sensor must report again after a reset.")
    neighbour = "The rain sensor must report no precipitation for 30 minutes. Close the dome at 06:00."
    snippets = choose_snippets(text, [neighbour])
    # The best span of the second sentence is shared with the neighbour, so the third sentence's is taken.
    assert snippets == ("below 15 m/s and gusts below 20", "The rain sensor must report again after")
    assert choose_snippets(text)[1] == "sensor must report no precipitation for 30 minutes."
    assert choose_snippets("## Rotation") == ("## Rotation",)


def test_lines_keep_their_bytes_key_order_spacing_bom_and_crlf() -> None:
    data = ('\ufeff{"id": "a", "question": "q?"}\r\n\r\n{"id":"b","question":"r?","tags":["x"]}\r\n'
            '{"id": "c", "question": "s?"}').encode()
    out = rewrite_lines(data, {3: {"id": "b", "question": "r?", "tags": ["x"], "answerable": False}})
    assert out == ('\ufeff{"id": "a", "question": "q?"}\r\n\r\n'
                   '{"id":"b","question":"r?","tags":["x"],"answerable":false}\r\n'
                   '{"id": "c", "question": "s?"}').encode()


def test_new_supports_merge_with_kept_ones_and_support_groups_are_renumbered(tmp_path: Path) -> None:
    record = {"id": "q", "question": "Wind?", "answerable": True, "gold_supports": [
        {"rel_path": NOTE, "heading_path": "# Night Shift Procedures", "snippets": ["alpha one"]},
        {"rel_path": NOTE, "heading_path": "", "snippets": ["beta two"]},
        {"rel_path": "far.md", "snippets": ["not shown"]},
    ], "required_support_groups": [[0, 2], [1]], "tags": ["t"]}
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    (q,) = load_evalset(path)
    shown = [_candidate(1, "alpha one is here, and gamma three of the 4 named parts."),
             _candidate(2, "beta two lives in this chunk with 12 other words around it."),
             _candidate(3, "A fresh chunk about Ember 4K camera cooling since June 2025.", "Night Shift > Cooling")]
    # Keep chunk 1 (support 0), unmark chunk 2 (so support 1 goes), mark chunk 3 (new); far.md matches nothing shown.
    out = updated_record(record, q, shown, {"c1", "c3"}, True)
    assert list(out) == list(record)
    assert out["gold_supports"][:2] == [record["gold_supports"][0], record["gold_supports"][2]]
    assert out["gold_supports"][2] == {"rel_path": NOTE, "heading_path": "Night Shift > Cooling",
                                       "snippets": ["about Ember 4K camera cooling since June 2025."]}
    assert out["required_support_groups"] == [[0, 1]]
    assert out["tags"] == ["t"]
    again = updated_record(out, q, shown, {"c1", "c3"}, True)
    assert len(again["gold_supports"]) == 4 - 1  # marking chunk 1 again adds nothing: support 0 covers it


def test_seed001_gets_chunk_and_document_ids_and_a_file_that_does_not_load_is_put_back(tmp_path: Path) -> None:
    path = tmp_path / "evalset.jsonl"
    lines = ['{"id": "e1", "question": "What?", "gold_doc_ids": ["d0"], "type": "fact", "source": "manual"}',
             '{"id": "e2", "question": "Other?", "gold_doc_ids": ["d0"], "type": "fact"}']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    q1, q2 = load_evalset(path)
    shown = [_candidate(1, "text one", chunk_id="k1", rel_path="d1"), _candidate(2, "text two", chunk_id="k2")]
    record = updated_record(json.loads(lines[0]), q1, shown, {"k1"}, True)
    assert record == {"id": "e1", "question": "What?", "gold_doc_ids": ["d0", "d1"], "type": "fact",
                      "source": "manual", "gold_chunk_ids": ["k1"]}
    assert updated_record(json.loads(lines[1]), q2, shown, set(), False) == {
        "id": "e2", "question": "Other?", "gold_doc_ids": [], "type": "negative", "gold_chunk_ids": []}
    before = path.read_bytes()
    with pytest.raises(InputError, match="gold_doc_ids"):
        save_records(path, {1: {"id": "e1", "question": "What?", "type": "fact", "gold_doc_ids": []}})
    assert path.read_bytes() == before


def test_saved_gold_resolves_after_rechunking_at_three_sizes_and_what_does_not_is_named(source, tmp_path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"id": "q", "question": "When may the dome reopen after humidity?"}\n', encoding="utf-8")
    (q,) = load_evalset(path)
    shown = source.top(q, 5)
    record = updated_record({"id": "q", "question": q.question}, q, shown, {shown[0].chunk_id, shown[1].chunk_id},
                            True, source.neighbours)
    (saved,) = save_records(path, {1: record})
    sizes = check_sizes(ChunkerParams(800, 100))
    assert [p.chunk_size_chars for p in sizes] == [800, 400, 1600]
    for params in sizes:
        gold = resolve_gold([saved], chunk_documents(source.documents, "sample", params))
        assert sorted(set(gold["support_index"])) == [0, 1]
    check = ResolutionCheck(source.documents, "sample", ChunkerParams(800, 100))
    assert check.problems([saved]) == []
    record["gold_supports"].append({"rel_path": NOTE, "heading_path": "Night Shift Procedures",
                                    "snippets": ["no such sentence anywhere"]})
    (broken,) = save_records(path, {1: record})
    assert check.problems([broken]) == [
        f"q gold_supports[2] at chunk_size_chars={size}: none of the snippets ['no such sentence anywhere'] "
        f"occurs in the matching chunks of '{NOTE}'" for size in (800, 400, 1600)
    ]


def test_failing_questions_are_those_whose_gold_is_not_in_the_latest_runs_top_k(source, tmp_path: Path) -> None:
    questions = load_evalset(SAMPLE / "evalsets" / "eval_set.jsonl")[:3]
    gold = resolve_gold(questions, source.chunks)
    hit = gold[gold["query_id"] == "test_001"]["chunk_id"].iloc[0]
    other = source.chunks[~source.chunks["chunk_id"].isin(gold["chunk_id"])]["chunk_id"].iloc[0]
    run = tmp_path / "20260101_000000"
    run.mkdir()
    (run / "metrics.json").write_text("{}", encoding="utf-8")
    (run / "config.json").write_text("{}", encoding="utf-8")
    rows = [{"query_id": qid, "retriever": "bm25", "k": k, "retrieved": [{"chunk_id": c} for c in top]}
            for qid, k, top in (("test_001", 1, [other]), ("test_001", 5, [other, hit]), ("test_002", 5, [other]))]
    (run / "results.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n", encoding="utf-8")
    assert failing_ids(run, "bm25", 5, questions, source.chunks) == {"test_002"}  # test_003 is not in the run
    assert failing_ids(run, "bm25", 1, questions, source.chunks) == {"test_001", "test_002"}
    with pytest.raises(ValueError, match="no results for retriever 'hybrid'"):
        failing_ids(run, "hybrid", 5, questions, source.chunks)
