"""Accepting a run as the baseline from the Dagster UI: launch `accept_baseline` with the run id in its config."""

import dagster as dg

from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.runs.baseline import accept


class AcceptBaselineConfig(dg.Config):
    run_id: str  # a run directory name under runs_dir, e.g. 20261124_020512
    note: str | None = None  # why it is accepted, kept in the run's accepted.json


@dg.op
def accept_run(context: dg.OpExecutionContext, config: AcceptBaselineConfig, settings: RagEvalSettings) -> None:
    """Later runs of the run's evalset compare with it, even when its own verdict was worse."""
    marker = accept(settings.load().runs_dir / config.run_id, config.note)
    context.log.info(f"accepted {config.run_id} as a baseline ({marker})")


@dg.job(description="Accept a run (e.g. one that was worse on purpose) as the baseline of later runs.")
def accept_baseline():
    accept_run()
