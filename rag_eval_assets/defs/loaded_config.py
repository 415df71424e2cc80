"""Whether rag_eval.yaml is still the file the code location loaded. A loaded code location plans with the settings
it read (its assets' code versions, partitions, what is stale), while every run it launches is a fresh process that
reads the file as it is: after an edit, the UI and the schedule of the old location show one configuration while
the runs they launch execute another. So the schedule refuses to request a night, saying how to reload, and each
night it or `rag-eval nightly` requests carries the sha256 of the file it was requested from (CONFIG_TAG; a
re-execution of the night's run keeps its parent's). Any other run (the UI's Materialize or launchpad, a backfill,
a re-execution) carries the sha256 its code location loaded, as the settings resource's `loaded_sha256` in the job
snapshot stored with the run. The run checks it before its first step (RagEvalSettings): a run made from another
version of the file fails at once, saying so and how to reload.

No dagster here: the schedule and the settings resource call it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CONFIG_TAG = "rag_eval/config_sha256"
CHANGED = "the configuration changed since the code location loaded it"
RELOAD = ("reload the code location: the UI's Deployment > Reload (dagster dev too), or on the nightly host "
          "`systemctl restart rag-eval-code-server`")


def config_sha256(path: Path) -> str:
    """The file's sha256 ('missing' when it is gone)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "missing"


def changed_since(path: Path, loaded_sha256: str) -> str | None:
    """None while `path` is the file whose sha256 was `loaded_sha256`; else what to say and do."""
    now = config_sha256(path)
    if now == loaded_sha256:
        return None
    return f"{CHANGED} ({path}: {loaded_sha256[:12]} when loaded, {now[:12]} now): {RELOAD}"
