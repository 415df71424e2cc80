"""Test-wide settings: no network, and a Dagster home that is never the developer's."""

from __future__ import annotations

import os

# Models come from installed packages; any attempt to reach a hub must fail fast, not hang.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
