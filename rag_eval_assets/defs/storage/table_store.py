"""Versioned tables behind one pointer: what a reader sees changes in one put of `current.json`, never file by file.

Layout under the store's base path (`<storage_dir>/assets`):

    <entry>/<version>.parquet            one immutable file per write; entry = asset[/dim=value...]
    _staging/<pipeline>/<entry>.json     a pipeline's written but not yet committed versions, one object per entry
    current.json                         {"generation", "committed_at", "pipeline", "tables": {entry: file},
                                          "previous": {entry: file}}: the tables readers see, and the version each
                                          entry had before its last change

A version's name starts with its UTC write time, so garbage collection can tell an old orphan from a file that a
run is writing right now. Object stores have no atomic rename but replace a single object atomically, which is all a
commit needs; a local store writes current.json to a temporary name and renames it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

CURRENT = "current.json"
STAGING = "_staging"
LOCK = ".commit.lock"
EXTENSION = ".parquet"
_TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
# An unreferenced version younger than this may belong to a run still writing it; staging untouched for longer
# belongs to a pipeline that failed and was never re-executed.
ORPHAN_GRACE = timedelta(days=1)
ABANDONED_STAGING = timedelta(days=7)
_MEMORY_LOCK = threading.Lock()  # memory:// lives in one process: a thread lock serialises its commits


def version_name(run_id: str | None, now: datetime | None = None) -> str:
    when = (now or datetime.now(timezone.utc)).strftime(_TIME_FORMAT)
    return f"{when}-{(run_id or uuid.uuid4().hex)[:8]}"


def _written_at(file: str) -> datetime | None:
    try:
        return datetime.strptime(file.rsplit("/", 1)[-1].split("-", 1)[0], _TIME_FORMAT).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


class TableStore:
    def __init__(self, base: UPath | str):
        self.base = UPath(base)

    # Reading --------------------------------------------------------------------------------------------------

    def current(self) -> dict:
        path = self.base / CURRENT
        if not path.exists():
            return {"generation": 0, "tables": {}, "previous": {}}
        return json.loads(path.read_text(encoding="utf-8"))

    def staged(self, pipeline: str) -> dict[str, str]:
        """entry -> file of every version `pipeline` wrote and has not committed yet."""
        root = self.base / STAGING / pipeline
        if not root.exists():
            return {}
        return {
            marker.relative_to(root).as_posix()[: -len(".json")]: json.loads(marker.read_text(encoding="utf-8"))["file"]
            for marker in root.rglob("*.json")
        }

    def locate(self, entry: str, pipeline: str | None = None) -> UPath | None:
        """The file a reader gets for `entry`: inside `pipeline` its own staged version first, else the committed one."""
        if pipeline is not None:
            marker = self.base / STAGING / pipeline / f"{entry}.json"
            if marker.exists():
                return self.base / json.loads(marker.read_text(encoding="utf-8"))["file"]
        file = self.current()["tables"].get(entry)
        return None if file is None else self.base / file

    # Writing --------------------------------------------------------------------------------------------------

    def write(self, entry: str, table: pa.Table, run_id: str | None) -> str:
        """Store `table` as a new version of `entry`; the file's path relative to the base. Nobody reads it until it
        is staged and committed, so a write cut short leaves an orphan, never a broken table."""
        file = f"{entry}/{version_name(run_id)}{EXTENSION}"
        path = self.base / file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            pq.write_table(table, f)
        return file

    def stage(self, pipeline: str, entry: str, file: str) -> None:
        """Record `file` as `pipeline`'s version of `entry`; a version it staged before for the entry is dropped."""
        marker = self.base / STAGING / pipeline / f"{entry}.json"
        replaced = json.loads(marker.read_text(encoding="utf-8"))["file"] if marker.exists() else None
        marker.parent.mkdir(parents=True, exist_ok=True)
        record = {"file": file, "staged_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        marker.write_text(json.dumps(record) + "\n", encoding="utf-8")
        if replaced is not None and replaced != file:
            (self.base / replaced).unlink(missing_ok=True)

    def commit(self, pipeline: str) -> list[str]:
        """Make every version `pipeline` staged current in one put of current.json; the entries committed (none when
        nothing is staged, so committing twice is harmless)."""
        with self._locked():
            staged = self.staged(pipeline)
            if staged:
                self._replace_current(staged, pipeline)
                self._drop(self.base / STAGING / pipeline)
                self._collect_garbage()
        return sorted(staged)

    def commit_now(self, entry: str, file: str, label: str) -> None:
        """Make one freshly written version current at once (a run outside any pipeline)."""
        with self._locked():
            self._replace_current({entry: file}, label)
            self._collect_garbage()

    # Internals ------------------------------------------------------------------------------------------------

    def _replace_current(self, changes: dict[str, str], pipeline: str) -> None:
        old = self.current()
        tables, previous = dict(old["tables"]), dict(old["previous"])
        superseded = []
        for entry, file in changes.items():
            before = tables.get(entry)
            if before is not None and before != file:
                if previous.get(entry) not in (None, before):
                    superseded.append(previous[entry])
                previous[entry] = before
            tables[entry] = file
        record = {
            "generation": old["generation"] + 1,
            "committed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "pipeline": pipeline,
            "tables": dict(sorted(tables.items())),
            "previous": dict(sorted(previous.items())),
        }
        self._put(CURRENT, json.dumps(record, indent=1) + "\n")
        # Only after the pointer has moved: the generation before the previous one is read by nobody.
        kept = set(tables.values()) | set(previous.values())
        for file in superseded:
            if file not in kept:
                (self.base / file).unlink(missing_ok=True)

    def _put(self, name: str, text: str) -> None:
        target = self.base / name
        self.base.mkdir(parents=True, exist_ok=True)
        if self.base.protocol in ("", "file", "local"):
            tmp = self.base / f".{name}.{uuid.uuid4().hex}.tmp"
            tmp.write_text(text, encoding="utf-8")
            tmp.rename(target)
        else:
            target.write_text(text, encoding="utf-8")  # one put replaces one object atomically

    def _collect_garbage(self, now: datetime | None = None) -> None:
        """Drop staging abandoned for a week, then every version that no manifest references and that is older than
        ORPHAN_GRACE (a failed write, a pipeline that never committed)."""
        now = now or datetime.now(timezone.utc)
        staging = self.base / STAGING
        current = self.current()
        referenced = set(current["tables"].values()) | set(current["previous"].values())
        for pipeline_dir in staging.iterdir() if staging.exists() else []:
            markers = [json.loads(m.read_text(encoding="utf-8")) for m in pipeline_dir.rglob("*.json")]
            latest = max((datetime.fromisoformat(m["staged_at"]) for m in markers), default=None)
            if latest is None or now - latest > ABANDONED_STAGING:
                self._drop(pipeline_dir)
            else:
                referenced |= {m["file"] for m in markers}
        for path in self.base.rglob(f"*{EXTENSION}"):
            file = path.relative_to(self.base).as_posix()
            written = _written_at(file)
            if file not in referenced and written is not None and now - written > ORPHAN_GRACE:
                path.unlink(missing_ok=True)

    def _drop(self, directory: UPath) -> None:
        if directory.exists():
            directory.fs.rm(directory.path, recursive=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise commits: a file lock on a local store (across processes), a thread lock in memory://. Other
        object stores have no lock; there commits come from one place, the end of a pipeline (docs/architecture.md)."""
        if self.base.protocol in ("", "file", "local"):
            self.base.mkdir(parents=True, exist_ok=True)
            with open(self.base.path + "/" + LOCK, "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        elif self.base.protocol == "memory":
            with _MEMORY_LOCK:
                yield
        else:
            yield
