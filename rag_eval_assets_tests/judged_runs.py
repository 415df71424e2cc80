"""A real pipeline run over the sample data whose answers a scripted judge on loopback scores: the run directory
and table store that `rag-eval label --grade` reads."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import dagster as dg

from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.llm_fault_server import Reply, llm_fault_server, schema_reply
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config

TWO_RETRIEVERS = "retrievers: {bm25: {kind: bm25}, bm25_tuned: {kind: bm25, k1: 1.2, b: 0.5}}\n"


def scripted_judge(body: Any) -> Reply:
    """Judges score by the sha256 of what they were sent, mod 6: every score of the scale occurs, and the same input
    always gets the same score. Other structured calls get the smallest valid reply."""
    schema = (body.get("response_format") or {}).get("schema") or {}
    if schema.get("title") not in ("groundedness", "correctness"):
        return schema_reply(body)
    score = int(hashlib.sha256(body["messages"][-1]["content"].encode()).hexdigest(), 16) % 6
    reply = {"supported_claims": [], "unsupported_claims": [], "score": score} if schema["title"] == "groundedness" \
        else {"reasoning": "scripted", "score": score}
    return Reply(json.dumps(reply))


def sample_evalset(directory: Path) -> Path:
    """A copy of the sample evalset: grades are written beside the evalset, never into the repository."""
    path = directory / "eval_set.jsonl"
    path.write_bytes(SAMPLE_EVALSET.read_bytes())
    return path


def judged_run(directory: Path, extra: str, evalset: Path) -> tuple[Path, Path]:
    """Run the whole pipeline with `extra` configuration (retrievers, k values, report) and an LLM judge; the
    configuration file and the run directory."""
    with llm_fault_server(responder=scripted_judge) as server:
        config = write_sample_config(directory, extra + f"llm: {{base_url: '{server.base_url}', model: judge-m}}\n",
                                     evalset=evalset)
        (directory / "home").mkdir()
        with dg.instance_for_test(temp_dir=str(directory / "home")) as instance:
            steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
    assert [s.job for s in steps if not s.result.success] == []
    (run_dir,) = (directory / "store" / "runs").iterdir()
    return config, run_dir
