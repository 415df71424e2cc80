"""Where the work will run and where the tables will be stored, checked before any run and whether or not anything is
stale: the dask scheduler of `execution.dask` answers within its `connect_timeout_s` (its `address_env` set and
well formed), and an object-store `storage_dir`'s bucket exists and the credentials can list, write, read and delete
under its prefix (one small object under `_preflight/` beside `assets/`, removed again). Each problem is one line naming the
setting, the endpoint and the bucket, never a secret. Nothing is created: a missing bucket stays missing, for a run
that made one would hide a mistyped name.

No dagster here: the command line calls it before it builds any run (cli/pipeline.py, cli/nightly.py), and a night's
run before its first (defs/night_run.py).
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Unanswered
from urllib.parse import urlsplit

from rag_eval_assets.errors import InfrastructureError
from rag_eval_assets.execution_settings import DaskSettings
from rag_eval_assets.redaction import redact_text, redact_url
from rag_eval_assets.settings import Settings

# An object store has this long to answer all four operations; botocore alone retries a refused connection for
# longer, and an operator waits for a line, not for the retries.
STORE_TIMEOUT_S = 8.0
LOCAL_PROTOCOLS = ("file", "local", "memory")
PROBES = "_preflight"  # under storage_dir, beside assets/: the check's object, removed again


def check_infrastructure(settings: Settings) -> None:
    """Raise InfrastructureError with every problem of the cluster and the store `settings` name."""
    problems = []
    if settings.execution.dask is not None:
        problems += scheduler_problems(settings.execution.dask)
    if urlsplit(settings.storage_dir).scheme not in ("", *LOCAL_PROTOCOLS):
        problems += store_problems(settings.storage_dir)
    if problems:
        raise InfrastructureError(problems)


def _within(seconds: float, work, *args):
    """`work(*args)` in a thread, given `seconds`: raises Unanswered past them (the thread is left to end alone)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(work, *args).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)


def scheduler_problems(dask: DaskSettings) -> list[str]:
    try:
        address = dask.scheduler_address()
    except ValueError as exc:
        return [str(exc)]
    setting = "execution.dask.address" if dask.address is not None else \
        f"execution.dask.address_env ({dask.address_env})"
    seconds = dask.connect_timeout_s
    try:
        _within(seconds + 1, asyncio.run, _identity(address, seconds))
    except (Unanswered, asyncio.TimeoutError, OSError) as exc:
        # dask retries a refused connection until the timeout, and then says only that it timed out.
        said = "" if isinstance(exc, Unanswered) else _short(exc)
        why = f": {said}" if said and not said.startswith("Timed out") else ""
        return [f"{setting}: the dask scheduler at {redact_url(address)} did not answer within {seconds:g} s "
                f"(execution.dask.connect_timeout_s){why}"]
    except Exception as exc:  # something listens there, but it speaks no dask
        return [f"{setting}: {redact_url(address)} answered, but not as a dask scheduler "
                f"({type(exc).__name__}: {_short(exc)})"]
    return []


async def _identity(address: str, seconds: float) -> dict:
    """The scheduler's answer to `identity`: a listener that is no dask scheduler does not give one."""
    from distributed.core import rpc

    async with rpc(address, timeout=seconds) as scheduler:
        return await asyncio.wait_for(scheduler.identity(), seconds)


def store_endpoint(protocol: str) -> str:
    """The endpoint the store's client uses, as botocore reads it from the environment."""
    if protocol in ("s3", "s3a"):
        return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
    return f"{protocol}'s default endpoint"


def store_problems(storage_dir: str) -> list[str]:
    from upath import UPath

    parts = urlsplit(storage_dir)
    bucket = parts.netloc
    where = f"storage_dir {redact_url(storage_dir)} (endpoint {redact_url(store_endpoint(parts.scheme))}, " \
            f"bucket {bucket})"
    base = UPath(storage_dir)
    options = {**base.storage_options, "skip_instance_cache": True}
    s3 = parts.scheme in ("s3", "s3a")
    if s3:  # one attempt each: botocore and s3fs would retry a dead endpoint for longer than an operator waits
        options["config_kwargs"] = {"connect_timeout": STORE_TIMEOUT_S / 2, "retries": {"max_attempts": 1}}
    fs = type(base.fs)(**options)
    if s3:
        fs.retries = 1  # s3fs's own retries: a class attribute, no constructor argument
    doing = ["reaching the store"]
    try:
        _within(STORE_TIMEOUT_S, _list_write_read_delete, fs, bucket, base.path.rstrip("/"), doing)
    except Unanswered:
        return [f"{where}: no answer within {STORE_TIMEOUT_S:g} s while {doing[-1]}"]
    except FileNotFoundError:
        if doing[-1].startswith("checking"):
            return [f"{where}: the bucket does not exist; a run never creates one: create it first "
                    "(docs/deployment.md, Storage on S3)"]
        return [f"{where}: {doing[-1]} failed: not found"]
    except PermissionError as exc:
        return [f"{where}: the credentials are refused ({_short(exc) or 'Forbidden'}) while {doing[-1]}"]
    except Exception as exc:  # an object store's client raises many kinds; the operator needs its message
        return [f"{where}: {doing[-1]} failed: {type(exc).__name__}: {_short(exc)}"]
    return []


def _short(exc: BaseException) -> str:
    return redact_text(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""


def _list_write_read_delete(fs, bucket: str, path: str, doing: list[str]) -> None:
    """Each operation a run needs of the store, in the order it needs them; `doing` says which one is under way."""
    doing.append(f"checking that bucket {bucket} exists")
    fs.info(bucket)  # not exists(): that reads a refusal (403) as a missing bucket
    doing.append(f"listing {path}")
    try:
        fs.ls(path, detail=False)
    except FileNotFoundError:  # nothing stored under the prefix yet: a first run
        pass
    # Beside the table store, not in it: a run listing its staging meanwhile would see the probe come and go.
    probe = f"{path}/{PROBES}/{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    body = b"rag-eval preflight: safe to delete"
    doing.append(f"writing {probe}")
    fs.pipe_file(probe, body)
    doing.append(f"reading {probe}")
    if fs.cat_file(probe) != body:
        raise OSError(f"{probe} read back other bytes than were written")
    doing.append(f"deleting {probe}")
    fs.rm_file(probe)
