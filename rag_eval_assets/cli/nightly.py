"""`rag-eval nightly`: a night now, as the 02:00 schedule starts one, its run launched by the daemon; `--wait`
follows it to its end (defs/night_on_demand.py)."""

from __future__ import annotations

import argparse
import os
import sys

NOT_NOW = 3  # exit code when no night can start now (no run queue, a night still running)


def _nightly(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from rag_eval_assets.defs.infrastructure import check_infrastructure
    from rag_eval_assets.settings import load_settings

    settings = load_settings(args.config)
    check_infrastructure(settings)  # before a run is queued that would fail on them, and before Dagster's import

    import dagster as dg

    from rag_eval_assets.cli.pipeline import dagster_home
    from rag_eval_assets.defs.night_on_demand import CannotStart, daemons_down, start_night
    from rag_eval_assets.defs.night_story import on_demand_night
    dagster_home(settings.config_file)
    os.environ["RAG_EVAL_CONFIG"] = str(settings.config_file)  # the code location the run is made from
    night = on_demand_night(datetime.now(timezone.utc))
    with dg.DagsterInstance.get() as instance:
        try:
            run = start_night(instance, settings, night)
        except CannotStart as exc:
            print(f"error: {exc}", file=sys.stderr)
            return NOT_NOW
        print(f"night {night}: run {run.run_id} ({run.job_name}) is in the run queue")
        print(f"follow it in the UI: Runs, tag rag_eval/night={night}")
        down = daemons_down(instance)
        if down:
            print(f"warning: the daemon has not reported lately ({', '.join(down)}): the run waits in the queue "
                  "until `dagster-daemon run` (the rag-eval-daemon service) runs", file=sys.stderr)
        return _follow(instance, settings, night) if args.wait else 0


def _follow(instance, settings, night: str) -> int:
    from rag_eval_assets.defs.jobs import METRICS_JOB
    from rag_eval_assets.defs.night_on_demand import follow_night
    from rag_eval_assets.reports.html import REPORT_FILE
    from rag_eval_assets.reports.night_verdict import night_verdict
    from rag_eval_assets.runs.listing import run_of_pipeline

    print("waiting for the night to end (Ctrl-C stops the waiting, not the night)", flush=True)
    reports = []

    def finished(run) -> None:
        partition = run.tags.get("dagster/partition")
        print(f"  {run.job_name}{f' [{partition}]' if partition else ''}: {run.status.value.lower()} "
              f"(run {run.run_id})", flush=True)
        if run.job_name == METRICS_JOB and run.is_success:
            reports.append(run_of_pipeline(settings.runs_dir, run.run_id))

    line, code = follow_night(instance, settings, night, finished)
    if code != 0:
        print(f"night {night}: {line}")
        return code
    where = f"run directory {reports[-1]}, report {reports[-1] / REPORT_FILE}" if reports and reports[-1] else \
        "nothing was missing or stale: no run directory"
    print(f"night {night} is complete, its tables committed; {where}")
    if reports and reports[-1]:
        verdict = night_verdict(reports[-1])
        print(f"verdict: {verdict[0] if verdict else 'no baseline run yet: nothing to compare'}")
    return 0


def add_nightly(sub, parents: list[argparse.ArgumentParser]) -> None:
    nightly = sub.add_parser(
        "nightly", parents=parents,
        help="start a night now, as the 02:00 schedule does: the daemon launches its run")
    nightly.add_argument("--wait", action="store_true",
                         help="follow the night to its end; exit 1 when a run of it failed or its verdict is worse, "
                         "2 when it is incompatible or the configuration changed since the code location loaded it")
    nightly.set_defaults(func=_nightly)
