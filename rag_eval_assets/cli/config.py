"""The configuration a command that can do without one reads: --config, else the default file when there is one."""

from __future__ import annotations

import argparse
from pathlib import Path


def configured(args: argparse.Namespace):
    """The settings of --config, or of the default configuration file when there is one; else None."""
    from rag_eval_assets.settings import default_config_path, load_settings

    path = Path(args.config) if args.config else default_config_path()
    return load_settings(path) if args.config or path.is_file() else None
