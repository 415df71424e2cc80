"""Writing a finished run: the run store's files plus its documents, summary.md and, when the run has a baseline,
the comparison with it (comparison.json with how the baseline was chosen, comparison.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_eval_assets.judging.grading import Grading
from rag_eval_assets.reports.comparison import comparison_markdown
from rag_eval_assets.reports.summary import summary_markdown
from rag_eval_assets.runs.judge_inputs import JUDGE_INPUTS_FILE, judge_inputs_text
from rag_eval_assets.runs.save import json_text, save_run
from rag_eval_assets.runs.store import COMPARISON_JSON, COMPARISON_MD, SUMMARY_FILE, Run, read_run
from rag_eval_assets.verdict.compare import compare_runs
from rag_eval_assets.verdict.ranking import KRanking, rank_retrievers
from rag_eval_assets.verdict.settings import GateSettings


def write_run(
    runs_dir: str | Path,
    *,
    description: str | None = None,
    previous: str | Path | None = None,
    baseline_policy: Mapping[str, Any] | None = None,
    gate: GateSettings = GateSettings(),
    rankings: list[KRanking] | None = None,
    grading: Grading | None = None,
    **stored: Any,
) -> Path:
    """save_run (results, metrics, config and its options in `stored`) with the documents: `previous` (a run
    directory, the baseline) adds the comparison with that run under `gate`. `rankings`, when given, receives the
    ranking of retrievers summary.md shows, so that the HTML report and the asset's metadata do not rank again.
    `grading`: the person's grades the gate uses (judging/grading.py)."""
    previous_run = read_run(previous) if previous is not None else None
    results = list(stored.pop("results"))

    def documents(run: Run) -> dict[str, str]:
        # Whole, whatever results.jsonl cuts: what grading shows of this run (runs/judge_inputs.py).
        files = {JUDGE_INPUTS_FILE: judge_inputs_text(results)}
        comparison = None
        if previous_run is not None:
            comparison = compare_runs(previous_run, run, gate, grading=grading)
            files[COMPARISON_JSON] = json_text({**comparison.as_json(), "baseline": dict(baseline_policy or {})})
            files[COMPARISON_MD] = comparison_markdown(comparison)
        ranked = rank_retrievers(run, gate, grading=grading)
        if rankings is not None:
            rankings[:] = ranked
        files[SUMMARY_FILE] = summary_markdown(run, description, previous_run, ranked, comparison)
        return files

    return save_run(runs_dir, description=description, previous_run_id=previous_run.run_id if previous_run else None,
                    documents=documents, results=results, **stored)
