"""Writing labels back into the evalset file: only the labeled lines change, each keeping its key order; a
backup before the first save of a session; every write atomic; the result must load again."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from rag_eval_assets.atomic_file import write_atomically
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.evalset.records import BOM
from rag_eval_assets.evalset.schema import Question

BACKUP_TIME_FORMAT = "%Y%m%d-%H%M%S"


def read_record(path: Path, line: int) -> dict[str, Any]:
    """The JSON object on 1-based `line` of a JSON Lines file, key order kept."""
    return json.loads(_lines(path.read_bytes())[line - 1].strip().removeprefix(BOM))


def rewrite_lines(data: bytes, records: dict[int, dict[str, Any]]) -> bytes:
    """`data` with each 1-based line in `records` replaced by that object; line endings, a BOM, blank lines and
    every other line stay byte for byte. The JSON spacing of the line is kept (compact or json.dumps')."""
    lines = _lines(data)
    for number, record in records.items():
        old = lines[number - 1]
        body = old.rstrip(b"\r\n")
        ending = old[len(body):]
        prefix = BOM if body.startswith(BOM) else b""
        compact = b'":' in body and b'": ' not in body
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":") if compact else None)
        lines[number - 1] = prefix + text.encode("utf-8") + ending
    return b"".join(lines)


def _lines(data: bytes) -> list[bytes]:
    # Split on b"\n" only, as the loader does (its line numbers are ours): a JSON string may hold U+2028.
    parts = data.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def backup(path: Path, now: datetime | None = None) -> Path:
    """Copy `path` to `path.bak-<timestamp>` (never over an existing backup) and return the copy."""
    stamp = (now or datetime.now()).strftime(BACKUP_TIME_FORMAT)
    target = path.with_name(f"{path.name}.bak-{stamp}")
    n = 2
    while target.exists():
        target = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    shutil.copy2(path, target)
    return target


def save_records(path: Path, records: dict[int, dict[str, Any]]) -> list[Question]:
    """Write `records` into `path` atomically and load it back with the evalset loader. When the written file
    does not load, the previous content is put back and the loader's InputError is raised."""
    before = path.read_bytes()
    write_atomically(path, rewrite_lines(before, records))
    try:
        return load_evalset(path)
    except InputError:
        write_atomically(path, before)
        raise
