"""Where a labeling session stopped, kept beside the evalset in `FILE.label-progress.json` so that the next
`rag-eval label` on the file starts there: {"position": question id, "visited": [question ids]}."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rag_eval_assets.atomic_file import write_atomically

SUFFIX = ".label-progress.json"


@dataclass
class Progress:
    position: str | None = None
    visited: list[str] = field(default_factory=list)


def progress_path(evalset: Path) -> Path:
    return evalset.with_name(evalset.name + SUFFIX)


def load_progress(evalset: Path) -> Progress:
    """The saved progress, or a fresh one when there is none or it cannot be read (it is only a convenience)."""
    try:
        data = json.loads(progress_path(evalset).read_text(encoding="utf-8"))
        return Progress(data.get("position"), [str(v) for v in data.get("visited", [])])
    except (OSError, ValueError, AttributeError):
        return Progress()


def save_progress(evalset: Path, progress: Progress) -> None:
    path = progress_path(evalset)
    text = json.dumps({"position": progress.position, "visited": progress.visited}, ensure_ascii=False, indent=1)
    write_atomically(path, (text + "\n").encode("utf-8"))
