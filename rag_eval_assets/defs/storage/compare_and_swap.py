"""Replace one small object only if it is still the version read: S3's conditional writes (`If-Match` on the ETag
read, `If-None-Match: *` for the first write). The table store replaces current.json this way on S3, so commits
from different processes or hosts serialise as they do under a local store's file lock, with no lock object that a
killed process could leave behind.
"""

from __future__ import annotations

from upath import UPath

PROTOCOLS = ("s3", "s3a")
# 412: the condition no longer holds (another write came first); 409: another conditional write of the same key is
# in flight (AWS answers so instead of waiting). Either way another commit got there first.
_CONFLICTS = ("PreconditionFailed", "ConditionalRequestConflict")


def supported(path: UPath) -> bool:
    return path.protocol in PROTOCOLS


def read_versioned(path: UPath) -> tuple[str | None, str | None]:
    """The object's text and the ETag to replace it with; (None, None) when it does not exist. The ETag is read
    first: text newer than it makes the conditional write fail and the caller read again, never overwrite it."""
    try:
        etag = path.fs.info(path.path, refresh=True)["ETag"]
        return path.fs.cat_file(path.path).decode("utf-8"), etag
    except FileNotFoundError:
        return None, None


def put_if_unchanged(path: UPath, text: str, etag: str | None) -> bool:
    """Write `text` only if the object still has `etag` (None: only if it does not exist yet); False when another
    writer replaced it since it was read."""
    condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
    try:
        path.fs.pipe_file(path.path, text.encode("utf-8"), **condition)
    except OSError as exc:  # s3fs turns botocore's ClientError into an OSError and keeps it as the cause
        code = (getattr(exc.__cause__, "response", None) or {}).get("Error", {}).get("Code")
        if code in _CONFLICTS:
            return False
        raise
    return True
