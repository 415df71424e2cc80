"""Which run a new run is compared with (runs/baseline.py): the newest good run of its evalset, or one accepted by
hand; every newer run passed over is listed with why."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from rag_eval_assets.runs.baseline import NEWEST_GOOD, Skipped, accept, choose_baseline
from rag_eval_assets.runs.status import NOT_FINISHED, NOT_RECORDED, mark_failed, mark_good, new_status, read_status
from rag_eval_assets_tests.test_runs_store import write_sample_run

EVALSET = "sample@eeeeeeeeeeee"  # test_runs_store.sample_config's
GATE_FAILED = "check run_comparison:quality_gate failed: worse: bm25@5: ndcg@k delta -0.300"


def _run(runs_dir: Path, day: int, pipeline: str | None, failures: tuple[str, ...] = ()) -> Path:
    """A run directory as evaluation_run writes it: pending, or failed when a check already failed."""
    return write_sample_run(runs_dir, now=datetime(2026, 11, day, tzinfo=timezone.utc),
                            status=new_status(pipeline, failures).as_json())


def test_only_good_or_accepted_runs_are_baselines(tmp_path: Path):
    good = _run(tmp_path, 20, "night-20")
    assert mark_good([good], "night-20") == [good]
    legacy = write_sample_run(tmp_path, now=datetime(2026, 11, 21, tzinfo=timezone.utc))  # no status.json
    worse = _run(tmp_path, 22, "night-22")
    mark_failed(worse, [GATE_FAILED])
    outage = _run(tmp_path, 23, "night-23", ("check evaluation_run:call_health failed: 14 of 14 calls failed",))
    unfinished = _run(tmp_path, 24, "night-24")  # its pipeline never committed

    chosen = choose_baseline(tmp_path, EVALSET)
    assert chosen.path == good and chosen.policy == NEWEST_GOOD
    assert chosen.skipped == (Skipped(unfinished.name, NOT_FINISHED),
                              Skipped(outage.name, "check evaluation_run:call_health failed: 14 of 14 calls failed"),
                              Skipped(worse.name, GATE_FAILED), Skipped(legacy.name, NOT_RECORDED))
    assert chosen.record()["skipped"][0] == {"run_id": unfinished.name, "why": NOT_FINISHED}
    assert choose_baseline(tmp_path, "other@000000000000").path is None

    # Another pipeline's commit leaves the unfinished run alone; its own makes it good.
    assert mark_good([unfinished, worse, outage], "night-23") == []
    assert mark_good([unfinished, worse, outage], "night-24") == [unfinished]
    assert choose_baseline(tmp_path, EVALSET).path == unfinished
    # Accepted by hand, a failed run is a baseline after all.
    accept(outage, "the judge was down, the retrieval is fine")
    assert choose_baseline(tmp_path, EVALSET, before=unfinished.name).path == outage


def test_a_rewritten_run_never_keeps_its_old_status(tmp_path: Path):
    run = _run(tmp_path, 20, "night-20")
    mark_good([run], "night-20")
    again = write_sample_run(tmp_path, now=datetime(2026, 11, 20, tzinfo=timezone.utc), run_id=run.name,
                             replace=True, status=new_status("night-20").as_json())
    assert again == run and read_status(run).state == "pending"


def test_failure_reasons_never_hold_a_credential(tmp_path: Path):
    run = _run(tmp_path, 20, None, ("check evaluation_run:call_health failed: at https://user:hunter2@llm.example/v1",))
    mark_failed(run, ["check run_comparison:quality_gate failed: see https://x.example/?api_key=hunter2"])
    text = (run / "status.json").read_text(encoding="utf-8")
    assert "hunter2" not in text and read_status(run).state == "failed" and len(read_status(run).reasons) == 2
