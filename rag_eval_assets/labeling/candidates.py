"""The chunks shown for a question: the top k of one of our retrievers over the configured corpus, built in
process (no Dagster, no stored index), or of the HTTP service under test asked with debug=true."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import pandas as pd

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.corpus.model import Document
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.index_env import index_env
from rag_eval_assets.retrieval.index_families import built_in_process
from rag_eval_assets.retrieval.kinds.http import client_for
from rag_eval_assets.retrieval.registry import BuiltIndexes, kind_of
from rag_eval_assets.retrieval.retrievers import run_retriever
from rag_eval_assets.retrieval.topk import ROLES
from rag_eval_assets.settings import Settings

HTTP = "http"  # the retriever name of the service under test, as in the run store


def searchable_variants(settings: Settings) -> list[str]:
    """The configured retrievers that search our own chunks (not a service under test)."""
    return [name for name, v in settings.variants.items() if not kind_of(v).own_answers]


@dataclass(frozen=True)
class Candidate:
    rank: int
    chunk_id: str
    doc_id: str
    rel_path: str
    heading_path: str
    page: int | None
    text: str
    score: float | None
    components: tuple[tuple[str, float | None], ...]  # (name, score) of the parts a fused score came from


def candidates_frame(candidates: list[Candidate]) -> pd.DataFrame:
    """Candidates shaped like the chunks table, for resolving gold against them."""
    return pd.DataFrame(
        {
            "chunk_id": [c.chunk_id for c in candidates],
            "doc_id": [c.doc_id for c in candidates],
            "rel_path": [c.rel_path for c in candidates],
            "heading_path": [c.heading_path for c in candidates],
            "page": pd.array([c.page for c in candidates], dtype="Int64"),
            "text": [c.text for c in candidates],
        }
    )


class CorpusCandidates:
    """One of the configured retrievers of our own (any kind that searches our chunks) over the configured corpus
    and its chunking, its indexes built in process."""

    def __init__(self, settings: Settings, retriever: str, documents: list[Document] | None = None):
        searchable = searchable_variants(settings)
        if retriever not in searchable:
            raise ValueError(f"unknown retriever {retriever!r}; valid: {', '.join(searchable)}")
        self.name = retriever
        self.variant = settings.variants[retriever]
        self.settings = settings
        self.documents = documents if documents is not None else load_corpus(settings.corpus.path)
        c = settings.chunking_of(retriever)  # the variant's own chunking, else the top-level one
        self.chunks = chunk_documents(self.documents, settings.corpus.id, ChunkerParams(c.chunk_size_chars,
                                                                                          c.overlap_chars))
        with ExitStack() as opened:  # closed here if building fails, by close() otherwise
            env = opened.enter_context(index_env(settings))
            self._retriever = kind_of(self.variant).build(self.variant, BuiltIndexes(
                self.chunks, settings.corpus.language, built_in_process(self.chunks, env)))
            self._open = opened.pop_all()

    def top(self, question: Question, k: int) -> list[Candidate]:
        folders = [list(question.folders)] if self.settings.retrieval.folder_filter else None
        results = run_retriever(self.name, self._retriever, [question.id], [question.question], self.chunks, k,
                                folders=folders)
        info = self.chunks.set_index("chunk_id")
        candidates = []
        for r in results.itertuples(index=False):
            chunk = info.loc[r.chunk_id]
            parts = tuple((role, _number(getattr(r, f"score_{role}")))
                          for role in ROLES if not pd.isna(getattr(r, f"score_{role}")))
            candidates.append(Candidate(int(r.rank), r.chunk_id, r.doc_id, chunk["rel_path"], chunk["heading_path"],
                                        None if pd.isna(chunk["page"]) else int(chunk["page"]), chunk["text"],
                                        _number(r.score), parts))
        return candidates

    def neighbours(self, candidate: Candidate) -> list[str]:
        """The texts of the other chunks of the candidate's document."""
        same = self.chunks[(self.chunks["rel_path"] == candidate.rel_path) & (self.chunks["chunk_id"] != candidate.chunk_id)]
        return same["text"].tolist()

    def close(self) -> None:
        self._open.close()


class SutCandidates:
    """The service under test (seed 002's debug contract), with the retry policy and key of `retrieval.http`."""

    name = HTTP

    def __init__(self, settings: Settings, base_url: str):
        self._client = client_for(settings.retrieval.http, base_url)

    def top(self, question: Question, k: int) -> list[Candidate]:
        response = self._client.ask(question.question, k)
        # The service's chunks are its own: doc_id is the note's rel_path, as for the pipeline's http retriever.
        return [
            Candidate(c.rank, c.chunk_id, c.rel_path, c.rel_path, c.heading_path, None, c.text, c.score_final,
                      (("vector", c.score_vector), ("lexical", c.score_lexical)))
            for c in response.chunks
        ]

    def neighbours(self, candidate: Candidate) -> list[str]:
        """Nothing beyond what it returned is known of the service's chunks."""
        return []

    def close(self) -> None:
        self._client.close()


def _number(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
