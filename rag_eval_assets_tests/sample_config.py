"""A rag_eval.yaml over the shipped sample data, with storage in a test's temporary directory."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
SAMPLE_EVALSET = SAMPLE / "evalsets" / "eval_set.jsonl"


def write_sample_config(directory: Path, extra: str = "", *, evalset: Path = SAMPLE_EVALSET,
                        name: str = "sample_eval_set", corpus: Path = SAMPLE / "corpus",
                        strict_gold: bool = False) -> Path:
    """`directory`/rag_eval.yaml: `corpus` (the sample's by default) and `evalset` (frozen as `name`, with
    `strict_gold`), storage under `directory`/store, plus `extra` YAML lines (retrievers, k_values, llm, ...)."""
    path = directory / "rag_eval.yaml"
    path.write_text(
        f"storage_dir: {directory / 'store'}\n"
        f"corpus: {{id: sample, path: {corpus}}}\n"
        f"evalset: {{name: {name}, path: {evalset}{', strict_gold: true' if strict_gold else ''}}}\n" + extra,
        encoding="utf-8",
    )
    return path
