"""The configuration a command that can do without one reads: --config, else the default file when there is one."""

from __future__ import annotations

import argparse
from pathlib import Path


def configured(args: argparse.Namespace):
    """The settings of --config, or of the default configuration file when there is one; else None."""
    from rag_eval_assets.settings import default_config_path, load_settings

    path = Path(args.config) if args.config else default_config_path()
    return load_settings(path) if args.config or path.is_file() else None


def given_run(given: str, settings, what: str):
    """The run `given` names, a run directory or a run id of the configured runs_dir; None, said on stderr, when it
    cannot be read (`what` names it there: "the base run", "the run")."""
    import sys

    from rag_eval_assets.errors import InputError
    from rag_eval_assets.runs.store import read_run

    path = Path(given)
    if not path.is_dir() and settings is not None and (settings.runs_dir / given).is_dir():
        path = settings.runs_dir / given
    try:
        return read_run(path)
    except InputError as exc:
        print(f"error: {what} {given} cannot be read: {exc}", file=sys.stderr)
        return None
