"""Writing a run directory (runs/store.py has the layout): its files in a hidden temporary directory renamed into
place, so that a run is complete or absent; texts cut to 200 characters unless kept whole; no credential in it.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from itertools import chain, count
from pathlib import Path
from typing import Any

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.redaction import drop_secrets, redact
from rag_eval_assets.runs.contents import jsonable
from rag_eval_assets.runs.store import CONFIG_FILE, METRICS_FILE, RESULTS_FILE, RUN_STATUS_FILE, TIMESTAMP_FORMAT, Run

RUN_ID_FORMAT = "%Y%m%d_%H%M%S"
TEXT_LIMIT = 200
ELLIPSIS = "…"
# Run directories are read by the group (a web server serving the reports), never by others.
RUN_DIR_MODE = 0o750
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def truncate_texts(value: Any, limit: int = TEXT_LIMIT) -> Any:
    """Every string longer than `limit` cut to `limit` characters, the last being "…"; values of identifier keys
    (`id`, `*_id`) are kept whole so runs stay joinable."""
    if isinstance(value, dict):
        return {k: v if _is_identifier(k) else truncate_texts(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [truncate_texts(v, limit) for v in value]
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + ELLIPSIS
    return value


def _is_identifier(key: str) -> bool:
    return key == "id" or key.endswith("_id")


def save_run(
    runs_dir: str | Path,
    *,
    results: Iterable[Mapping[str, Any]],
    metrics: Mapping[str, Any],
    config: Mapping[str, Any],
    description: str | None = None,
    previous_run_id: str | None = None,
    documents: Callable[[Run], Mapping[str, str]] = lambda run: {},
    store_full_text: bool = False,
    run_id: str | None = None,
    now: datetime | None = None,
    replace: bool = False,
    status: Mapping[str, Any] | None = None,
) -> Path:
    """Write a run directory and return its path.

    `results`: rows as made by results_rows (any iterable, read once); `metrics`: as made by metrics_document; `config`: the full
    configuration (run_config). `documents(run)` gives the files made from the run as it will be read back (the
    summary, the comparison with its baseline: reports/run_directory.py), written with the rest.
    Without `run_id` the id is the UTC time (`now`, default the current time) with -2, -3, ... appended while taken;
    an explicit `run_id` that is taken raises FileExistsError, unless `replace` (a re-execution rewriting its run).
    `status` (runs/status.py) is written with the rest, so a rewritten run never keeps its old status.
    """
    runs_dir = Path(runs_dir)
    if "aggregate" not in metrics:
        raise InputError([InputProblem("metrics", None, "aggregate", "missing (build it with metrics_document)")])
    if run_id is not None and not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be letters, digits, '_', '.', '-' and not start with '.' or '-', got {run_id!r}")
    created = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    # The documents are made from this config, so they hold no credential either.
    clean_config = redact(drop_secrets(jsonable(dict(config))))
    rows = [jsonable(dict(r)) if store_full_text else truncate_texts(jsonable(dict(r))) for r in results]
    runs_dir.mkdir(parents=True, exist_ok=True)
    stem = run_id or created.strftime(RUN_ID_FORMAT)
    names = [stem] if run_id is not None else chain([stem], (f"{stem}-{n}" for n in count(2)))
    for name in names:
        target = runs_dir / name
        if target.exists() and not replace:
            continue
        document = {
            **jsonable(dict(metrics)),
            "run": {
                "run_id": name,
                "created_at": created.strftime(TIMESTAMP_FORMAT),
                "description": description,
                "previous_run_id": previous_run_id,
            },
        }
        files = {
            METRICS_FILE: json_text(document),
            CONFIG_FILE: json_text(clean_config, sort_keys=True),
            **documents(Run(target, rows, document, clean_config, "")),
        }
        if status is not None:
            files[RUN_STATUS_FILE] = json_text(dict(status))
        if _write_atomically(runs_dir, target, rows, files, replace=replace):
            return target
    raise FileExistsError(f"run {runs_dir / stem} already exists")


def json_text(content: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=2, sort_keys=sort_keys) + "\n"


def _write_atomically(runs_dir: Path, target: Path, rows: list[dict[str, Any]], files: dict[str, str], *,
                      replace: bool = False) -> bool:
    """Write results.jsonl and `files` (name -> text) into a hidden temporary directory and rename it to `target`;
    False when `target` appeared in the meantime (another writer took the id). With `replace` an existing `target`
    is moved aside first and deleted once the new one is in place; files of it that the new run does not write
    (report.html, charts, accepted.json) move over, so that a rewritten run keeps them until they are redone."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=runs_dir))
    tmp.chmod(RUN_DIR_MODE)
    try:
        with (tmp / RESULTS_FILE).open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if replace and target.exists():
            for old in target.iterdir():
                if not (tmp / old.name).exists():
                    old.rename(tmp / old.name)
            old_dir = target.rename(runs_dir / f".{target.name}.old")
            tmp.rename(target)
            shutil.rmtree(old_dir)
            return True
        try:
            # rename refuses a non-empty target; an empty directory someone created meanwhile is not a run.
            tmp.rename(target)
        except OSError:
            if target.exists():
                return False
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return True
