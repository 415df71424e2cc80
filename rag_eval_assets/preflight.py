"""Everything that can be checked before a table is written, checked first: the credentials the configuration names
by environment variable (set, and readable as the clients read them), the evalset (parsed, validated, not edited
under a name it was frozen as), the person's grades beside it (every line, judging/grades.py), the corpus
(loaded), the chunking and the gold labels (resolved against those chunks). The configuration was checked when the
caller loaded its Settings. A problem raises InputError naming the file, line and field (for a credential: the
setting's dotted key and the variable, never its value).

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
from rag_eval_assets.corpus.settings import ChunkingSettings
from rag_eval_assets.credentials import CredentialError, bearer_key, headers_from_env
from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.freeze import eval_set_version, evalset_sha256
from rag_eval_assets.evalset.frozen_store import registered_sha256
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.schema import Question
from rag_eval_assets.judging.grades import grades_path, load_grades
from rag_eval_assets.llm.settings import ROLES
from rag_eval_assets.retrieval.registry import kind_of, own_answer_variants
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


def chunk_corpus(settings: Settings, documents: list[Document], chunking: ChunkingSettings | None = None,
                 ) -> pd.DataFrame:
    """The corpus cut by `chunking` (a variant's own), else by the top-level `chunking`."""
    c = chunking or settings.chunking
    return chunk_documents(documents, settings.corpus.id, ChunkerParams(c.chunk_size_chars, c.overlap_chars))


def credential_problems(settings: Settings) -> list[InputProblem]:
    """Every environment variable the configuration names for a credential (the api_key_env and headers_env of each
    role's llm section and of each service under test) that is unset or that its client could not use."""
    where = str(settings.config_file)
    found: list[InputProblem] = []
    for role in ROLES:
        if (endpoint := settings.llm_for(role)) is None:
            continue
        key = settings.llm_key(role)
        try:
            if endpoint.api_key_env:
                bearer_key(endpoint.api_key_env, f"{key}.api_key_env")
            headers_from_env(endpoint.headers_env, f"{key}.headers_env")
        except CredentialError as exc:
            found.append(InputProblem(where, None, exc.setting, exc.problem))
    for name in own_answer_variants(settings.variants):
        variant = settings.variants[name]
        try:
            kind_of(variant).check_environment(variant)
        except CredentialError as exc:
            found.append(InputProblem(where, None, exc.setting, exc.problem))
    return list(dict.fromkeys(found))  # variants that inherit one section report its problem once


def preflight(settings: Settings) -> dict[str, int]:
    """Run every check; counts of what was checked. Raises InputError at the first input that fails (with every
    credential problem at once)."""
    credentials = credential_problems(settings)
    if credentials:
        raise InputError(credentials)
    evalset = check_evalset(settings)
    if evalset.problem is not None:
        raise InputError([evalset.problem])
    # The grades beside the evalset are read by the report at the end: a bad line stops the run here instead.
    load_grades(grades_path(settings.evalset.path))
    documents = load_corpus(settings.corpus.path)
    counts = {"questions": len(evalset.questions), "documents": len(documents)}
    # Every chunking a variant searches: a snippet may straddle a boundary of one chunking and not another's.
    for chunk_set, chunking in {None: settings.chunking, **settings.chunk_sets}.items():
        chunks = chunk_corpus(settings, documents, chunking)
        # Gold that resolves to nothing stops the run here only with evalset.strict_gold; otherwise gold_resolves
        # reports it and the run scores what resolved.
        resolution = resolve_gold_report(evalset.questions, chunks, {d.doc_id for d in documents},
                                         strict=settings.evalset.strict_gold)
        at = f" {chunk_set}" if chunk_set else ""
        counts.update({f"chunks{at}": len(chunks), f"gold_rows{at}": len(resolution.gold),
                       f"unresolved_gold{at}": len(resolution.unresolved)})
    return counts
