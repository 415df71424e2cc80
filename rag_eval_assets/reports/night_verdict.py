"""What a night says of itself, read from the run directory its metrics run wrote: the verdict in capitals with the
cells that decided it (their metric, base and candidate, the interval) or, for INCOMPATIBLE, why the runs cannot be
compared, and the verdict's exit code (comparison.json's: 0 better or no change, 1 worse, 2 incompatible)."""

from __future__ import annotations

import json
from pathlib import Path

from rag_eval_assets.runs.store import COMPARISON_JSON
from rag_eval_assets.verdict.text import interval_text, signed

SHOWN_CELLS = 3  # deciding cells named on the line; the rest are counted


def night_verdict(run_dir: Path | None) -> tuple[str, int] | None:
    """(the verdict's line, its exit code) of the run in `run_dir`; None when it had no baseline to compare with."""
    if run_dir is None or not (run_dir / COMPARISON_JSON).is_file():
        return None
    comparison = json.loads((run_dir / COMPARISON_JSON).read_text(encoding="utf-8"))
    verdict, base = comparison["verdict"], comparison["base_run_id"]
    head = f"{verdict.upper()} against run {base}"
    if comparison["incompatible"]:
        return f"{head}: {'; '.join(comparison['incompatible'])}", comparison["exit_code"]
    cells = {f"{c['retriever']}@{c['k']}": c for c in comparison["cells"]}
    deciding = [name for name in comparison["deciding_cells"] if name in cells]
    if not deciding:
        return head, comparison["exit_code"]
    shown = [f"{name} {_cell(cells[name])}" for name in deciding[:SHOWN_CELLS]]
    more = f" (and {len(deciding) - SHOWN_CELLS} more cells)" if len(deciding) > SHOWN_CELLS else ""
    return f"{head}, decided by {'; '.join(shown)}{more}", comparison["exit_code"]


def _cell(c: dict) -> str:
    return (f"{c['metric']} {c['base']:.3f} -> {c['cand']:.3f} ({signed(c['delta'], 3)} "
            f"{interval_text(c['ci_low'], c['ci_high'], 3)})")
