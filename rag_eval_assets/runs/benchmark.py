"""Multi-dataset benchmark (seed 000 section 6): several (corpus, evalset) pairs evaluated alike, and one
benchmark score over them.

Aggregation rule: summary.weighted_score = sum(w_d * score_d) / sum(w_d) over the datasets d, where score_d is the
dataset's own weighted_score (seed 000 section 5) and w_d its `weight` from the configuration. When no dataset has a
weight, w_d is the dataset's question count n_d, so every question weighs the same whichever dataset it is in.
Giving a weight to some datasets and not to others is an error: there is no fair default to mix with. So is a
dataset whose evalset has no seed 000 rule: the weighted score is not applicable to any of its questions.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.metrics.rule_score import RULE_FIELDS, has_rules

DATASET_KEYS = ("name", "corpus", "evalset", "weight")


@dataclass(frozen=True)
class BenchmarkDataset:
    name: str
    corpus: Path  # a file or folder the corpus loaders read
    evalset: Path
    weight: float | None = None


@dataclass(frozen=True)
class BenchmarkConfig:
    name: str
    datasets: tuple[BenchmarkDataset, ...]


def load_benchmark_config(path: str | Path) -> BenchmarkConfig:
    """Read a benchmark configuration (JSON or YAML):

        {"name": "benchmark-v1",
         "datasets": [{"name": "annual-report", "corpus": "data/ar.pdf", "evalset": "eval/ar.jsonl", "weight": 2.0},
                      ...]}

    Paths are relative to the configuration file. Every problem is reported, `line` being the dataset's index.
    """
    path = Path(path)
    file = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([InputProblem(file, None, None, "benchmark configuration not found")]) from None
    except yaml.YAMLError as exc:
        raise InputError([InputProblem(file, None, None, f"invalid JSON/YAML: {exc}")]) from exc
    if not isinstance(data, dict) or not isinstance(data.get("datasets"), list) or not data["datasets"]:
        raise InputError([InputProblem(file, None, "datasets", "must be a non-empty list of datasets")])
    problems: list[InputProblem] = []
    unknown = sorted(set(data) - {"name", "datasets"})
    problems += [InputProblem(file, None, key, "unknown key; valid keys: name, datasets") for key in unknown]
    datasets, seen = [], set()
    for index, item in enumerate(data["datasets"]):
        if not isinstance(item, dict):
            problems.append(InputProblem(file, index, None, f"must be a mapping, got {type(item).__name__}"))
            continue
        bad = [InputProblem(file, index, k, f"unknown key; valid keys: {', '.join(DATASET_KEYS)}")
               for k in sorted(set(item) - set(DATASET_KEYS))]
        name = item.get("name")
        if not isinstance(name, str) or not name:
            bad.append(InputProblem(file, index, "name", "required, a non-empty string"))
        elif name in seen:
            bad.append(InputProblem(file, index, "name", f"repeats dataset name {name!r}"))
        seen.add(name)
        paths = {}
        for key in ("corpus", "evalset"):
            value = item.get(key)
            if not isinstance(value, str) or not value:
                bad.append(InputProblem(file, index, key, "required, a path"))
                continue
            paths[key] = (path.parent / value).resolve()
            if not paths[key].exists():
                bad.append(InputProblem(file, index, key, f"not found: {paths[key]}"))
        weight = item.get("weight")
        if weight is not None and not _positive_number(weight):
            bad.append(InputProblem(file, index, "weight", f"must be a number > 0, got {weight!r}"))
        problems += bad
        if not bad:
            datasets.append(BenchmarkDataset(name, paths["corpus"], paths["evalset"], _float_or_none(weight)))
    weighted = [i for i, item in enumerate(data["datasets"]) if isinstance(item, dict) and "weight" in item]
    if weighted and len(weighted) != len(data["datasets"]):
        problems.append(InputProblem(file, None, "weight", "give a weight to every dataset or to none"))
    if problems:
        raise InputError(problems)
    name = data.get("name")
    return BenchmarkConfig(name if isinstance(name, str) and name else path.stem, tuple(datasets))


def require_rules(config: BenchmarkConfig, file: str | Path) -> None:
    """InputError naming each dataset (by its index in `file`) whose evalset has no seed 000 rule: the weighted
    score is not applicable to any of its questions. Checked before any dataset runs."""
    problems = [
        InputProblem(str(file), index, "evalset", f"{d.evalset} has no question with a seed 000 rule "
                     f"({', '.join(RULE_FIELDS)}): it has no weighted_score to aggregate")
        for index, d in enumerate(config.datasets)
        if not any(map(has_rules, load_evalset(d.evalset)))
    ]
    if problems:
        raise InputError(problems)


def aggregate_benchmark(per_dataset: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The benchmark report from each dataset's dict(name, weight (or None), weighted_score, n):

        {"summary": {"weighted_score", "weighting": "weight" | "questions", "datasets", "questions"},
         "datasets": [{"name", "weight", "share", "weighted_score", "n"}, ...]}

    `share` is the dataset's part of the total weight.
    """
    problems = []
    for index, d in enumerate(per_dataset):
        score, n = d.get("weighted_score"), d.get("n")
        if not isinstance(d.get("name"), str):
            problems.append(InputProblem("per_dataset", index, "name", "required, a string"))
        if not _finite_number(score):
            problems.append(InputProblem("per_dataset", index, "weighted_score", f"must be a number, got {score!r}"))
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            problems.append(InputProblem("per_dataset", index, "n", f"must be an integer >= 0, got {n!r}"))
        weight = d.get("weight")
        if weight is not None and not _positive_number(weight):
            problems.append(InputProblem("per_dataset", index, "weight", f"must be a number > 0, got {weight!r}"))
    has_weight = [d.get("weight") is not None for d in per_dataset]
    if not per_dataset:
        problems.append(InputProblem("per_dataset", None, None, "no dataset"))
    elif any(has_weight) and not all(has_weight):
        problems.append(InputProblem("per_dataset", None, "weight", "give a weight to every dataset or to none"))
    if problems:
        raise InputError(problems)
    by_weight = all(has_weight)
    weights = [float(d["weight"]) if by_weight else float(d["n"]) for d in per_dataset]
    total = sum(weights)
    if total <= 0:
        raise InputError([InputProblem("per_dataset", None, "n", "no questions in any dataset")])
    score = sum(w * float(d["weighted_score"]) for w, d in zip(weights, per_dataset)) / total
    return {
        "summary": {
            "weighted_score": score,
            "weighting": "weight" if by_weight else "questions",
            "datasets": len(per_dataset),
            "questions": sum(int(d["n"]) for d in per_dataset),
        },
        "datasets": [
            {
                "name": d["name"],
                "weight": _float_or_none(d.get("weight")),
                "share": w / total,
                "weighted_score": float(d["weighted_score"]),
                "n": int(d["n"]),
            }
            for w, d in zip(weights, per_dataset)
        ],
    }


def _finite_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _positive_number(value: Any) -> bool:
    return _finite_number(value) and value > 0


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)
