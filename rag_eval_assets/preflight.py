"""Everything that can be checked before a table is written, checked first: the evalset (parsed, validated, not
edited under a name it was frozen as), the corpus (loaded), the chunking and the gold labels (resolved against those
chunks). The configuration was checked when the caller loaded its Settings. A problem raises InputError naming the
file, line and field.

The input assets call these same functions (check_evalset, chunk_corpus) and the same loaders, so what passes here
is what they compute; the `preflight` asset runs `preflight` before any of them writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import resolve_gold_report
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.corpus.model import Document
from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.freeze import eval_set_version, evalset_sha256
from rag_eval_assets.evalset.frozen_store import registered_sha256
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.settings import Settings


@dataclass(frozen=True)
class CheckedEvalset:
    questions: list[Question]
    sha256: str
    version: str  # name@sha256[:12]
    registered_sha256: str | None  # first frozen under the configured name; None for a name never frozen
    problem: InputProblem | None  # set when the file changed after it was frozen under that name

    @property
    def unchanged(self) -> bool:
        return self.problem is None


def check_evalset(settings: Settings) -> CheckedEvalset:
    """Parse and validate the evalset (InputError on any problem) and compare it with its frozen version; reads only,
    so freezing stays with the asset that writes."""
    path, name = settings.evalset.path, settings.evalset.name
    questions = load_evalset(path, settings.evalset.format)
    sha = evalset_sha256(path)
    registered = registered_sha256(settings.frozen_dir, name)
    problem = None
    if registered not in (None, sha):
        problem = InputProblem(str(path), None, None, f"changed after it was frozen as {name}@{registered[:12]}; "
                               "give the edited file a new evalset.name")
    return CheckedEvalset(questions, sha, eval_set_version(name, sha), registered, problem)


def chunk_corpus(settings: Settings, documents: list[Document]) -> pd.DataFrame:
    params = ChunkerParams(settings.chunking.chunk_size_chars, settings.chunking.overlap_chars)
    return chunk_documents(documents, settings.corpus.id, params)


def preflight(settings: Settings) -> dict[str, int]:
    """Run every check; counts of what was checked. Raises InputError at the first input that fails."""
    evalset = check_evalset(settings)
    if evalset.problem is not None:
        raise InputError([evalset.problem])
    documents = load_corpus(settings.corpus.path)
    chunks = chunk_corpus(settings, documents)
    # Gold that resolves to nothing stops the run here only with evalset.strict_gold; otherwise gold_resolves
    # reports it and the run scores what resolved.
    resolution = resolve_gold_report(evalset.questions, chunks, {d.doc_id for d in documents},
                                     strict=settings.evalset.strict_gold)
    return {"questions": len(evalset.questions), "documents": len(documents), "chunks": len(chunks),
            "gold_rows": len(resolution.gold), "unresolved_gold": len(resolution.unresolved)}
