"""Labeling against the HTTP service under test (a loopback service over the sample notes)."""

from __future__ import annotations

from pathlib import Path

from rag_eval_assets.corpus.chunking import ChunkerParams
from rag_eval_assets.corpus.gold import normalise_for_match
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.labeling.candidates import SutCandidates
from rag_eval_assets.labeling.resolution import ResolutionCheck
from rag_eval_assets.labeling.session import LabelSession
from rag_eval_assets_tests.label_helpers import bm25_source, plain_questions
from rag_eval_assets_tests.sut_server import CorpusChunk, chunk_id_of, sut_server


def test_a_question_labeled_against_the_service_gets_supports_from_its_chunks(tmp_path: Path) -> None:
    ours = bm25_source(tmp_path)
    notes = ours.chunks[ours.chunks["rel_path"].str.startswith("notes/")]
    corpus = [CorpusChunk(r.rel_path, r.heading_path, r.text) for r in notes.itertuples()]
    evalset = plain_questions(tmp_path / "questions.jsonl")
    check = ResolutionCheck(ours.documents, "sample", ChunkerParams(800, 100))
    # A 503 first: the labeler goes through the same retry policy as the pipeline's http retriever.
    with sut_server(corpus, faults=[503]) as server:
        source = SutCandidates(ours.settings, server.url)
        try:
            session = LabelSession(evalset, source, k=3, check=check)
            shown = session.candidates
            session.toggle(0)
            result = session.save()
        finally:
            source.close()
    assert [r.query for r in server.requests] == [{"debug": ["true"]}] * 2
    assert server.requests[-1].body == {"question": session.question.question, "k": 3}
    top = shown[0]
    assert top.chunk_id == chunk_id_of("test-vault", CorpusChunk(top.rel_path, top.heading_path, top.text))
    (support,) = load_evalset(evalset)[0].gold_supports
    assert (support.rel_path, support.heading_path) == (top.rel_path, top.heading_path)
    assert support.snippets and all(normalise_for_match(s) in normalise_for_match(top.text) for s in support.snippets)
    assert result.problems == []  # and it resolves in our corpus at three chunk sizes
