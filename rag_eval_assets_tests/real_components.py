"""What the tests that drive real external components share: Debian's Chromium, and the skip-or-fail rule."""

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps dialling hosts this closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def unavailable(reason: str) -> None:
    """Skip with the reason where a real component cannot be had; under CI=true, where `make test` installs it,
    its absence is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true needs it: {reason}")
    pytest.skip(reason)
