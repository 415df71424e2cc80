"""Versioned tables behind one pointer: what a reader sees changes in one put of `current.json`, never file by file.

Layout under the store's base path (`<storage_dir>/assets`):

    <entry>/<version>.parquet            one immutable file per write; entry = asset[/dim=value...]
    _staging/<pipeline>/<entry>.json     a pipeline's written but not yet committed versions, one object per entry
    _staging/<pipeline>/.base            the tables the pipeline reads: current.json's as it first touched the store
    current.json                         {"generation", "committed_at", "pipeline", "tables": {entry: file},
                                          "previous": {entry: file}}: the tables readers see, and the version each
                                          entry had before its last change

A version's name starts with its UTC write time, so garbage collection can tell an old orphan from a file that a
run is writing right now. Object stores have no atomic rename but replace a single object atomically, which is all a
commit needs; a local store writes current.json to a temporary name and renames it.

A pipeline reads one snapshot: its own staged versions, else those of its base, pinned when it first reads or
writes the store, so another pipeline's commit meanwhile changes nothing it reads. Its commit reads current.json,
adds its versions and replaces it. When entries it did not write changed since its base (another pipeline
committed them), its tables beside those would be a mixture of two runs: the commit fails with CommitConflict,
nothing of it committed and its staging kept, and the pipeline is run again on the new tables. Commits are
serialised by a file lock on a local store, a thread lock in memory://, and on S3 by a conditional write
(compare_and_swap.py): a commit that finds current.json replaced since it read it reads it again, checks it again
and adds its versions to the new one, as it would have after waiting for the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
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
BASE = ".base"  # not *.json: never taken for an entry's marker
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
    """Nothing was committed: another pipeline committed tables this one did not write since this one read the
    store, or other commits kept replacing current.json while this one was adding its versions."""


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
        """The file a reader gets for `entry`: inside `pipeline` its own staged version first, else its base's;
        outside any pipeline the committed one."""
        if pipeline is None:
            file = self.current()["tables"].get(entry)
        else:
            marker = self.base / STAGING / pipeline / f"{entry}.json"
            if marker.exists():
                return self.base / json.loads(marker.read_text(encoding="utf-8"))["file"]
            file = self.pinned_base(pipeline)["tables"].get(entry)
        return None if file is None else self.base / file

    def tables(self, pipeline: str | None = None) -> dict[str, str]:
        """entry -> file of every table a reader sees: inside `pipeline` its base with its staged versions over it,
        outside any pipeline the committed ones."""
        if pipeline is None:
            return dict(self.current()["tables"])
        return {**self.pinned_base(pipeline)["tables"], **self.staged(pipeline)}

    def pinned_base(self, pipeline: str) -> dict:
        """{"generation", "tables", "pinned_at"}: current.json as it was when `pipeline` first read or wrote the
        store, pinned then; processes that pin at the same moment all get the one written first."""
        path = self.base / STAGING / pipeline / BASE
        base = _read_or_none(path)  # one read on the path every load takes, not an existence check and a read
        if base is None:
            current = self.current()
            record = {"generation": current["generation"], "tables": current["tables"],
                      "pinned_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            self._create(path, json.dumps(record, indent=1) + "\n")
            base = json.loads(path.read_text(encoding="utf-8"))
        return base

    # Writing --------------------------------------------------------------------------------------------------

    def write(self, entry: str, table: pa.Table, run_id: str | None) -> str:
        """Store `table` as a new version of `entry`; the file's path relative to the base. Nobody reads it until it
        is staged and committed, so a write cut short leaves an orphan, never a broken table."""
        file = f"{entry}/{version_name(run_id)}{EXTENSION}"
        path = self.base / file
        self._folder(path.parent)
        with path.open("wb") as f:
            pq.write_table(table, f)
        return file

    def stage(self, pipeline: str, entry: str, file: str) -> None:
        """Record `file` as `pipeline`'s version of `entry`; a version it staged before for the entry is dropped."""
        self.pinned_base(pipeline)  # a pipeline that writes before it reads commits over what was current then
        marker = self.base / STAGING / pipeline / f"{entry}.json"
        replaced = json.loads(marker.read_text(encoding="utf-8"))["file"] if marker.exists() else None
        self._folder(marker.parent)
        record = {"file": file, "staged_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        marker.write_text(json.dumps(record) + "\n", encoding="utf-8")
        if replaced is not None and replaced != file:
            (self.base / replaced).unlink(missing_ok=True)

    def commit(self, pipeline: str) -> list[str]:
        """Make every version `pipeline` staged current in one put of current.json; the entries committed (none when
        nothing is staged, so committing twice is harmless). Raises CommitConflict, its staging kept, when another
        pipeline committed entries this one did not write since its base."""
        with self._locked():
            staged = self.staged(pipeline)
            if staged:
                self._replace_current(staged, pipeline, self.pinned_base(pipeline))
            self._drop(self.base / STAGING / pipeline)
            if staged:
                self._collect_garbage()
        return sorted(staged)

    def release(self, pipeline: str) -> None:
        """`pipeline` failed: when it staged nothing, its base goes too, so that it leaves nothing behind (a
        re-execution pins a new one); staged versions stay, for a re-execution to commit."""
        if not self.staged(pipeline):
            self._drop(self.base / STAGING / pipeline)

    def commit_now(self, entry: str, file: str, label: str) -> None:
        """Make one freshly written version current at once (a run outside any pipeline)."""
        with self._locked():
            self._replace_current({entry: file}, label)
            self._collect_garbage()

    # Internals ------------------------------------------------------------------------------------------------

    def _replace_current(self, changes: dict[str, str], pipeline: str, base: dict | None = None) -> None:
        for _ in range(SWAP_ATTEMPTS):
            old, etag = self._read_current()
            if base is not None:
                _refuse_a_mixture(base, old, changes, pipeline)
            record, superseded = _with_changes(old, changes, pipeline)
            if self._put_current(json.dumps(record, indent=1) + "\n", etag):
                break
        else:
            raise CommitConflict(
                f"{self.base / CURRENT}: replaced by {SWAP_ATTEMPTS} other commits while {pipeline} was committing; "
                "nothing of it was committed: run it again"
            )
        # Only after the pointer has moved: the generation before the previous one is read by nobody but a
        # pipeline whose base still names it (the staging is walked only when there is something to delete).
        kept = set(record["tables"].values()) | set(record["previous"].values())
        doomed = [file for file in superseded if file not in kept]
        pinned = self._pinned()[1] if doomed else set()
        for file in doomed:
            if file not in pinned:
                (self.base / file).unlink(missing_ok=True)

    def _put_current(self, text: str, etag: str | None) -> bool:
        """Replace current.json; False when, on S3, another commit replaced it since it was read (with `etag`)."""
        target = self.base / CURRENT
        self._folder(self.base)
        if self.base.protocol in _LOCAL:
            tmp = self.base / f".{CURRENT}.{uuid.uuid4().hex}.tmp"
            tmp.write_text(text, encoding="utf-8")
            tmp.rename(target)
        elif compare_and_swap.supported(target):
            return compare_and_swap.put_if_unchanged(target, text, etag)
        else:
            target.write_text(text, encoding="utf-8")  # one put replaces one object atomically
        return True

    def _pinned(self, now: datetime | None = None) -> tuple[list[UPath], set[str]]:
        """The staging folders abandoned for ABANDONED_STAGING, and the files the others stage or read (their bases)."""
        now = now or datetime.now(timezone.utc)
        staging = self.base / STAGING
        abandoned, pinned = [], set()
        for pipeline_dir in _children(staging):
            markers = _markers(pipeline_dir)
            base = _read_or_none(pipeline_dir / BASE)
            times = [datetime.fromisoformat(m["staged_at"]) for m in markers]
            times += [datetime.fromisoformat(base["pinned_at"])] if base else []
            if not times or now - max(times) > ABANDONED_STAGING:
                abandoned.append(pipeline_dir)
            else:
                pinned |= {m["file"] for m in markers} | set(base["tables"].values() if base else ())
        return abandoned, pinned

    def _collect_garbage(self, now: datetime | None = None) -> None:
        """Drop staging abandoned for a week, then every version that no manifest or live pipeline references and
        that is older than ORPHAN_GRACE (a failed write, a pipeline that never committed)."""
        now = now or datetime.now(timezone.utc)
        abandoned, referenced = self._pinned(now)
        for pipeline_dir in abandoned:
            self._drop(pipeline_dir)
        # Read after the staging: a pipeline that commits meanwhile (on S3 nothing locks it out) is in one or the other.
        current = self.current()
        referenced |= set(current["tables"].values()) | set(current["previous"].values())
        for path in self.base.rglob(f"*{EXTENSION}"):
            file = path.relative_to(self.base).as_posix()
            written = _written_at(file)
            if file not in referenced and written is not None and now - written > ORPHAN_GRACE:
                path.unlink(missing_ok=True)

    def _create(self, path: UPath, text: str) -> None:
        """Write `path` only if it does not exist yet: a reader sees nothing or the whole text of the first writer."""
        self._folder(path.parent)
        if self.base.protocol in _LOCAL:
            tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_text(text, encoding="utf-8")
            with contextlib.suppress(FileExistsError):
                os.link(tmp.path, path.path)  # fails, and leaves the first writer's, when the file exists
            tmp.unlink()
        elif compare_and_swap.supported(path):
            compare_and_swap.put_if_unchanged(path, text, None)
        elif self.base.protocol == "memory":
            with _MEMORY_LOCK:
                if not path.exists():
                    path.write_text(text, encoding="utf-8")
        elif not path.exists():  # other object stores: one pipeline's runs come one after another
            path.write_text(text, encoding="utf-8")

    def _folder(self, directory: UPath) -> None:
        """Make `directory` where folders exist; an object store has none, and there a mkdir only creates the bucket,
        which would hide a mistyped bucket name: a write into a missing bucket fails instead."""
        if self.base.protocol in (*_LOCAL, "memory"):
            directory.mkdir(parents=True, exist_ok=True)

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
    try:
        markers = list(pipeline_dir.rglob("*.json"))
    except (FileNotFoundError, NotADirectoryError):  # the pipeline committed its last staged table and its folder went with it
        return []
    for marker in markers:
        with contextlib.suppress(FileNotFoundError):
            found.append(json.loads(marker.read_text(encoding="utf-8")))
    return found


def _children(folder: UPath) -> list[UPath]:
    """The folder's entries, none when it is gone: on S3 a folder is only its objects' common prefix, and another
    pipeline may drop the last of them between a look and the listing."""
    try:
        return list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):  # S3's listing and universal_pathlib's own check say so
        return []


def _read_or_none(path: UPath) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _refuse_a_mixture(base: dict, current: dict, changes: dict[str, str], pipeline: str) -> None:
    """Raise CommitConflict when entries that `pipeline` does not change moved since its base: committing would put
    its tables beside another run's, computed from inputs it never read."""
    before, now = base["tables"], current["tables"]
    moved = sorted(e for e in before.keys() | now.keys() if before.get(e) != now.get(e) and e not in changes)
    if moved:
        shown = ", ".join(moved[:4]) + (f" and {len(moved) - 4} more" if len(moved) > 4 else "")
        raise CommitConflict(
            f"pipeline {pipeline} was not committed: since it read the tables (generation {base['generation']}), "
            f"other commits changed {shown}, which it did not recompute (now generation {current['generation']}, "
            f"last by {current.get('pipeline')}). Its tables beside those would mix two runs: run it again"
        )


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
