"""Freezing an evalset: the content hash that names its version in every run."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.detect import directory_format

SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def evalset_sha256(path: str | Path) -> str:
    """sha256 of the evalset's bytes. For a directory: of the files its format names (BEIR: queries.jsonl then
    each qrels file present, qrels.tsv, qrels/test.tsv), each preceded by "<relative path>\\n<byte count>\\n",
    so moving content between the files or renaming one changes the hash."""
    p = Path(path)
    if not p.exists():
        raise InputError([InputProblem(str(path), None, None, "no such file or directory")])
    if p.is_file():
        return hashlib.sha256(p.read_bytes()).hexdigest()
    fmt = directory_format(p, str(path))
    missing = [name for name in fmt.files if not (p / name).is_file()]
    if missing:
        message = f"a {fmt.title} directory needs {' and '.join(missing)}"
        raise InputError([InputProblem(str(path), None, None, message)])
    digest = hashlib.sha256()
    for rel in fmt.contents(p):
        data = (p / rel).read_bytes()
        digest.update(f"{rel}\n{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()


def eval_set_version(name: str, sha: str) -> str:
    """Seed 003's eval_set_version (`question_v2@<hash>`), here with the first 12 hex digits of the sha256."""
    if not SHA256_HEX.fullmatch(sha):
        raise ValueError(f"expected a lowercase sha256 hex digest, got {sha!r}")
    return f"{name}@{sha[:12]}"
