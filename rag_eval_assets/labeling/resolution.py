"""Does the gold just written resolve? At the configured chunking and at half and double its chunk size, since
anchored gold exists to survive re-chunking."""

from __future__ import annotations

import dataclasses
from functools import cached_property

import pandas as pd

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import resolve_gold_report
from rag_eval_assets.corpus.model import Document
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.schema import Question


def check_sizes(params: ChunkerParams) -> tuple[ChunkerParams, ...]:
    """The configured chunking, then half and double its size with the overlap scaled alike."""
    half = ChunkerParams(max(params.chunk_size_chars // 2, 2), params.overlap_chars // 2)
    double = ChunkerParams(params.chunk_size_chars * 2, params.overlap_chars * 2)
    return params, half, double


class ResolutionCheck:
    """Resolves questions' gold against the corpus chunked at each of `check_sizes(params)` (chunked once)."""

    def __init__(self, documents: list[Document], corpus_id: str, params: ChunkerParams):
        self.documents = documents
        self.corpus_id = corpus_id
        self.sizes = check_sizes(params)

    @cached_property
    def _chunks(self) -> list[pd.DataFrame]:
        return [chunk_documents(self.documents, self.corpus_id, p) for p in self.sizes]

    def problems(self, questions: list[Question]) -> list[str]:
        """One line per label that resolves to no chunk at some size: question, field, size and why.

        Chunk ids are only checked at the configured chunking: they name chunks of that chunking alone.
        """
        lines = []
        for n, (params, chunks) in enumerate(zip(self.sizes, self._chunks)):
            checked = questions if n == 0 else [dataclasses.replace(q, gold_chunk_ids=()) for q in questions]
            for q in checked:
                try:
                    resolve_gold_report([q], chunks)
                except InputError as exc:
                    lines.extend(f"{q.id} {p.field} at chunk_size_chars={params.chunk_size_chars}: {p.message}"
                                 for p in exc.problems)
        return lines
