"""Versioned tables behind one pointer: what a reader sees changes in one put of `current.json`, never file by file.

Layout under the store's base path (`<storage_dir>/assets`):

    <entry>/<version>.parquet            one immutable file per write; entry = asset[/dim=value...]
    _staging/<pipeline>/<entry>.json     a pipeline's written but not yet committed versions, one object per entry
    current.json                         {"generation", "committed_at", "pipeline", "tables": {entry: file},
                                          "previous": {entry: file}}: the tables readers see, and the version each
                                          entry had before its last change

A version's name starts with its UTC write time, so garbage collection can tell an old orphan from a file that a
run is writing right now. Object stores have no atomic rename but replace a single object atomically, which is all a
commit needs; a local store writes current.json to a temporary name and renames it. A commit reads current.json,
adds its versions and replaces it; commits are serialised by a file lock on a local store, a thread lock in
memory://, and on S3 by a conditional write (compare_and_swap.py): a commit that finds current.json replaced since
it read it reads it again and adds its versions to the new one, as it would have after waiting for the lock.
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

from rag_eval_assets.defs.storage import compare_and_swap

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
# Commits that replaced current.json while this one was adding its versions, before it gives up (nothing committed).
SWAP_ATTEMPTS = 20
_LOCAL = ("", "file", "local")


def version_name(run_id: str | None, now: datetime | None = None) -> str:
    when = (now or datetime.now(timezone.utc)).strftime(_TIME_FORMAT)
    return f"{when}-{(run_id or uuid.uuid4().hex)[:8]}"


def _written_at(file: str) -> datetime | None:
    try:
        return datetime.strptime(file.rsplit("/", 1)[-1].split("-", 1)[0], _TIME_FORMAT).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


class CommitConflict(RuntimeError):
    """Other commits kept replacing current.json while this one was adding its versions: nothing was committed."""


class TableStore:
    def __init__(self, base: UPath | str):
        base = UPath(base)
        if base.protocol not in (*_LOCAL, "memory"):
            # fsspec caches an object store's listings for the life of the process: another process's commit or
            # staging would go unseen, and a read of current.json sized from a stale listing fails.
            base = UPath(str(base), **{**base.storage_options, "use_listings_cache": False})
        self.base = base

    # Reading --------------------------------------------------------------------------------------------------

    def current(self) -> dict:
        return self._read_current()[0]

    def _read_current(self) -> tuple[dict, str | None]:
        """current.json and, on S3, the ETag a conditional write replaces exactly that version with."""
        path = self.base / CURRENT
        if compare_and_swap.supported(path):
            text, etag = compare_and_swap.read_versioned(path)
        else:
            text, etag = (path.read_text(encoding="utf-8") if path.exists() else None), None
        if text is None:
            return {"generation": 0, "tables": {}, "previous": {}}, None
        return json.loads(text), etag

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
        for _ in range(SWAP_ATTEMPTS):
            old, etag = self._read_current()
            record, superseded = _with_changes(old, changes, pipeline)
            if self._put_current(json.dumps(record, indent=1) + "\n", etag):
                break
        else:
            raise CommitConflict(
                f"{self.base / CURRENT}: replaced by {SWAP_ATTEMPTS} other commits while {pipeline} was committing; "
                "nothing of it was committed: run it again"
            )
        # Only after the pointer has moved: the generation before the previous one is read by nobody.
        kept = set(record["tables"].values()) | set(record["previous"].values())
        for file in superseded:
            if file not in kept:
                (self.base / file).unlink(missing_ok=True)

    def _put_current(self, text: str, etag: str | None) -> bool:
        """Replace current.json; False when, on S3, another commit replaced it since it was read (with `etag`)."""
        target = self.base / CURRENT
        self.base.mkdir(parents=True, exist_ok=True)
        if self.base.protocol in _LOCAL:
            tmp = self.base / f".{CURRENT}.{uuid.uuid4().hex}.tmp"
            tmp.write_text(text, encoding="utf-8")
            tmp.rename(target)
        elif compare_and_swap.supported(target):
            return compare_and_swap.put_if_unchanged(target, text, etag)
        else:
            target.write_text(text, encoding="utf-8")  # one put replaces one object atomically
        return True

    def _collect_garbage(self, now: datetime | None = None) -> None:
        """Drop staging abandoned for a week, then every version that no manifest references and that is older than
        ORPHAN_GRACE (a failed write, a pipeline that never committed)."""
        now = now or datetime.now(timezone.utc)
        staging = self.base / STAGING
        referenced = set()
        for pipeline_dir in staging.iterdir() if staging.exists() else []:
            markers = _markers(pipeline_dir)
            latest = max((datetime.fromisoformat(m["staged_at"]) for m in markers), default=None)
            if latest is None or now - latest > ABANDONED_STAGING:
                self._drop(pipeline_dir)
            else:
                referenced |= {m["file"] for m in markers}
        # Read after the staging: a pipeline that commits meanwhile (on S3 nothing locks it out) is in one or the other.
        current = self.current()
        referenced |= set(current["tables"].values()) | set(current["previous"].values())
        for path in self.base.rglob(f"*{EXTENSION}"):
            file = path.relative_to(self.base).as_posix()
            written = _written_at(file)
            if file not in referenced and written is not None and now - written > ORPHAN_GRACE:
                path.unlink(missing_ok=True)

    def _drop(self, directory: UPath) -> None:
        if directory.exists():
            with contextlib.suppress(FileNotFoundError):  # on S3 its pipeline may have committed and dropped it
                directory.fs.rm(directory.path, recursive=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise commits: a file lock on a local store (across processes), a thread lock in memory://. S3 needs
        none: current.json is replaced by a conditional write (_put_current). Other object stores have neither; there
        commits come from one place, the end of a pipeline (docs/architecture.md)."""
        if self.base.protocol in _LOCAL:
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


def _markers(pipeline_dir: UPath) -> list[dict]:
    """A pipeline's staging markers; on S3, where garbage collection holds no lock, those the pipeline drops while
    they are read (it committed them: they are in current.json) are left out."""
    found = []
    for marker in pipeline_dir.rglob("*.json"):
        with contextlib.suppress(FileNotFoundError):
            found.append(json.loads(marker.read_text(encoding="utf-8")))
    return found


def _with_changes(old: dict, changes: dict[str, str], pipeline: str) -> tuple[dict, list[str]]:
    """The current.json that makes `changes` (entry -> file) current over `old`, and the versions it drops out of
    the previous-version window."""
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
    return record, superseded
