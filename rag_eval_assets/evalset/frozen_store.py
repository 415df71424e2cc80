"""Frozen evalsets: content-addressed copies and the sha256 first frozen under each version name.

An evalset is frozen under a name (seed 002: "freeze eval_set.jsonl"; seed 003: `question_v2@<sha>`). The first
freeze of a name registers its sha256; editing the file and keeping the name is what preflight and the blocking check
catch, before anything is frozen. Copies are stored by content, so a changed file never overwrites the frozen one.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

REGISTRY_NAME = "registry.json"


def registered_sha256(store_dir: Path, name: str) -> str | None:
    """The sha256 first frozen under `name`, None for a name never frozen; reads only."""
    registry = store_dir / name / REGISTRY_NAME
    return json.loads(registry.read_text(encoding="utf-8"))["sha256"] if registry.exists() else None


def freeze(source: Path, store_dir: Path, name: str, sha256: str) -> None:
    """Copy `source` (a file or a BEIR directory) to store_dir/name/sha256 and register the name if it is new."""
    name_dir = store_dir / name
    copy = name_dir / sha256
    if not copy.exists():
        tmp = name_dir / f".{sha256}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if source.is_dir():
            shutil.copytree(source, tmp / source.name)
        else:
            shutil.copy2(source, tmp / source.name)
        tmp.rename(copy)
    registry = name_dir / REGISTRY_NAME
    if not registry.exists():
        record = {
            "name": name,
            "sha256": sha256,
            "source": str(source),
            "frozen_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        registry.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
