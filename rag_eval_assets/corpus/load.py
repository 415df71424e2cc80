"""Load a corpus directory (Markdown, PDF, text files, or a BEIR corpus.jsonl) and fingerprint it."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from rag_eval_assets.corpus.beir import load_beir_corpus
from rag_eval_assets.corpus.markdown import load_markdown
from rag_eval_assets.corpus.model import Document
from rag_eval_assets.corpus.pdf import load_pdf
from rag_eval_assets.corpus.text import load_text
from rag_eval_assets.errors import InputError, InputProblem

BEIR_CORPUS = "corpus.jsonl"
LOADERS: dict[str, Callable[[Path, str], Document]] = {
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".pdf": load_pdf,
    ".txt": load_text,
}


def load_corpus(root: str | Path) -> list[Document]:
    """Every document under `root`, in sorted rel_path order.

    A directory holding corpus.jsonl is a BEIR corpus. Any other directory is walked: *.md,
    *.markdown, *.pdf and *.txt files (extension case ignored) are loaded, hidden files and
    directories skipped, other files ignored; rel_path (= doc_id) is the POSIX path relative to
    `root`. A single file is also accepted as a corpus of one (seed 000 evaluates one PDF); its
    rel_path is its name. Problems in every file are raised together; no documents at all is an
    error naming `root`.
    """
    root = Path(root)
    is_beir, files = _corpus_files(root)
    if is_beir:
        documents = load_beir_corpus(files[0][1])
    else:
        documents = []
        problems = []
        for rel_path, path in files:
            try:
                documents.append(LOADERS[path.suffix.lower()](path, rel_path))
            except InputError as e:
                problems.extend(e.problems)
        if problems:
            raise InputError(problems)
    if not documents:
        raise InputError([InputProblem(str(root), None, None, "the corpus holds no documents")])
    return documents


def corpus_sha256(root: str | Path) -> str:
    """sha256 over the sorted (rel_path, sha256 of the bytes) pairs of the files load_corpus reads.

    Seed 000's pdf_sha256 generalised to many files: editing, adding, removing or renaming any
    file changes it; files load_corpus ignores do not.
    """
    _, files = _corpus_files(Path(root))
    pairs = [[rel_path, hashlib.sha256(path.read_bytes()).hexdigest()] for rel_path, path in files]
    canonical = json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _corpus_files(root: Path) -> tuple[bool, list[tuple[str, Path]]]:
    """(is BEIR, sorted (rel_path, path) of the files to read); raises when there is nothing to read."""
    if root.is_file():
        if root.name == BEIR_CORPUS:
            return True, [(root.name, root)]
        if root.suffix.lower() in LOADERS:
            return False, [(root.name, root)]
        supported = ", ".join(LOADERS)
        raise InputError([InputProblem(str(root), None, None, f"unsupported file type (expected {supported})")])
    if not root.is_dir():
        raise InputError([InputProblem(str(root), None, None, "corpus path does not exist")])
    if (root / BEIR_CORPUS).is_file():
        return True, [(BEIR_CORPUS, root / BEIR_CORPUS)]

    files = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]
        for name in names:
            path = Path(directory, name)
            if not name.startswith(".") and path.suffix.lower() in LOADERS:
                files.append((path.relative_to(root).as_posix(), path))
    if not files:
        supported = ", ".join(LOADERS)
        message = f"the corpus holds no documents (no {BEIR_CORPUS} and no {supported} files)"
        raise InputError([InputProblem(str(root), None, None, message)])
    return False, sorted(files)
