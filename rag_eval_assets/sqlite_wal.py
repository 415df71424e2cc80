"""One way to open the project's SQLite caches: WAL mode, a generous busy timeout, and a retried switch to WAL.

Parallel Dagster processes share one cache file. SQLite waits on a busy lock for `timeout` seconds for ordinary
statements, but switching a new database to WAL can fail at once with "database is locked" while another process
is creating the same file; that switch is retried here for as long as the busy timeout.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

BUSY_TIMEOUT_S = 60.0
_RETRY_EVERY_S = 0.05


def connect(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=check_same_thread)
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return db
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                db.close()
                raise
            time.sleep(_RETRY_EVERY_S)
