"""What the labeler tests share: the sample corpus behind a bm25 chunk source, and a plain question list."""

from __future__ import annotations

import json
from pathlib import Path

from rag_eval_assets.labeling.candidates import CorpusCandidates
from rag_eval_assets.settings import Settings, load_settings
from rag_eval_assets_tests.sample_config import SAMPLE_EVALSET, write_sample_config

PLAIN_IDS = ("test_001", "test_009", "test_002")  # answerable, unanswerable (not in the corpus), answerable


def sample_settings(directory: Path) -> Settings:
    return load_settings(write_sample_config(directory))


def bm25_source(directory: Path) -> CorpusCandidates:
    return CorpusCandidates(sample_settings(directory), "bm25")


def plain_questions(path: Path) -> Path:
    """Three sample questions as a plain {"id", "question"} list: what a person starts labeling from."""
    records = {r["id"]: r for r in map(json.loads, SAMPLE_EVALSET.read_text(encoding="utf-8").splitlines())}
    lines = [json.dumps({"id": qid, "question": records[qid]["question"]}, ensure_ascii=False) for qid in PLAIN_IDS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
