"""Evalset content hashes and version names."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.freeze import eval_set_version, evalset_sha256

QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


def make_beir(root: Path, qrels_rel: str = "qrels/test.tsv", qrels: str = QRELS) -> Path:
    (root / qrels_rel).parent.mkdir(parents=True, exist_ok=True)
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n', encoding="utf-8")
    (root / qrels_rel).write_text(qrels, encoding="utf-8")
    return root


def test_file_hash_is_sha256_of_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    data = '{"id": "q1", "question": "Сколько?"}\n'.encode()
    path.write_bytes(data)
    assert evalset_sha256(path) == hashlib.sha256(data).hexdigest()
    assert evalset_sha256(str(path)) == evalset_sha256(path)


def test_one_changed_byte_changes_the_hash(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_bytes(b'{"id": "q1", "question": "x", "weight": 1}\n')
    before = evalset_sha256(path)
    path.write_bytes(b'{"id": "q1", "question": "x", "weight": 2}\n')
    assert evalset_sha256(path) != before


def test_beir_hash_covers_queries_and_qrels_with_their_paths(tmp_path: Path) -> None:
    nested = make_beir(tmp_path / "nested")
    queries = (nested / "queries.jsonl").read_bytes()
    qrels = (nested / "qrels" / "test.tsv").read_bytes()
    expected = hashlib.sha256(
        f"queries.jsonl\n{len(queries)}\n".encode() + queries + f"qrels/test.tsv\n{len(qrels)}\n".encode() + qrels
    ).hexdigest()
    assert evalset_sha256(nested) == expected
    # The same bytes under the flat qrels name are a different evalset version.
    assert evalset_sha256(make_beir(tmp_path / "flat", qrels_rel="qrels.tsv")) != expected
    # So is one changed grade.
    assert evalset_sha256(make_beir(tmp_path / "regraded", qrels=QRELS.replace("\t1\n", "\t2\n"))) != expected
    # Where the directory lives does not matter.
    assert evalset_sha256(make_beir(tmp_path / "copy")) == expected


def test_beir_hash_of_a_directory_without_queries_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        evalset_sha256(tmp_path)
    assert [(p.file, p.line, p.field) for p in caught.value.problems] == [(str(tmp_path), None, None)]
    with pytest.raises(InputError):
        evalset_sha256(tmp_path / "missing.jsonl")


def test_eval_set_version() -> None:
    sha = hashlib.sha256(b"questions").hexdigest()
    assert eval_set_version("question_v2", sha) == f"question_v2@{sha[:12]}"
    with pytest.raises(ValueError):
        eval_set_version("question_v2", "abc123")
