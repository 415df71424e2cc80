"""Test-wide settings: no network, and a Dagster home that is never the developer's."""

from __future__ import annotations

import os

import pytest

# Models come from installed packages; any attempt to reach a hub must fail fast, not hang.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True, scope="module")
def _dagster_home_left_as_found():
    """`rag-eval` sets DAGSTER_HOME for its own process when it is unset; a test module calling it in process must
    not hand its home to the modules after it (which modules share a process depends on how the run spreads them)."""
    before = os.environ.get("DAGSTER_HOME")
    yield
    if before is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = before
