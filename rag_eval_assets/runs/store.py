"""The run store (seed 002 "Results Storage"): one directory per evaluation run.

    <runs_dir>/<run_id>/
        results.jsonl   one line per (question, retriever, k): question, retrieved chunks, answer, judgments, metrics
        metrics.json    the aggregates (+ the run's id, creation time, description, previous run)
        config.json     the full configuration: version tuple, config_hash, ... (secret-looking keys dropped, URLs
                        redacted: redaction.py)
        summary.md      description, configuration, metric table, change against the previous run
        status.json     whether the run is good: its blocking checks passed and its pipeline finished (status.py)

Run ids are UTC timestamps (`20251218_063617`, then `-2`, `-3` for runs started in the same second). A run is written
into a hidden temporary directory and renamed into place, so a run directory is either complete or absent.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain, count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.generation.judges import judge_input_sha256
from rag_eval_assets.metrics.aggregate import AGGREGATE_COLUMNS
from rag_eval_assets.redaction import drop_secrets, redact
from rag_eval_assets.runs.versions import VersionTuple

RESULTS_FILE = "results.jsonl"
JUDGMENT_FRAME_COLUMNS = ("query_id", "retriever", "k", "judge", "score", "replicate", "judge_input_sha256")
METRICS_FILE = "metrics.json"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.md"
COMPARISON_JSON = "comparison.json"  # the comparison with the run's baseline, when it had one
COMPARISON_MD = "comparison.md"
RUN_STATUS_FILE = "status.json"  # runs/status.py
RUN_ID_FORMAT = "%Y%m%d_%H%M%S"
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # created_at, accepted_at, sent_at: UTC
TEXT_LIMIT = 200
ELLIPSIS = "…"
VERSION_TUPLE_KEY = "version_tuple"
EVAL_SET_VERSION_KEY = "version_tuple.dataset.eval_set_version"
CHUNK_SIZE_KEY = "version_tuple.index.chunk_size_chars"
OVERLAP_KEY = "version_tuple.index.overlap_chars"
# The Dagster run a run directory belongs to: the first run of its group, so that a re-execution finds it again.
PIPELINE_RUN_KEY = "dagster_root_run_id"
UNRESOLVED_GOLD = "unresolved_gold"  # metrics.json: gold labels that resolved to nothing, when some did not
JUDGES = "judges"  # metrics.json: agreement with the grades, self-consistency and calibrated means, when judged
# Run directories are read by the group (a web server serving the reports), never by others.
RUN_DIR_MODE = 0o750
STAGES = ("retrieval", "generation", "judging")
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_ANSWER_FIELDS = (
    "answerer",
    "abstained",
    "abstained_inferred",
    "abstain_reason",
    "citations",
    "model",
    "prompt_sha256",
    "prompt_tokens",
    "completion_tokens",
    "error",
)
_JSON_TEXT_FIELDS = ("citations", "supported_claims", "unsupported_claims", "judge_input")


@dataclass(frozen=True)
class Run:
    """A run as read back from its directory."""

    path: Path
    results: list[dict[str, Any]]
    metrics: dict[str, Any]
    config: dict[str, Any]
    summary: str
    comparison: dict[str, Any] | None = None  # comparison.json: the verdict against the run's baseline

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def created_at(self) -> str | None:
        return (self.metrics.get("run") or {}).get("created_at")

    def aggregate_frame(self) -> pd.DataFrame:
        """metrics.json's aggregate rows: retriever, k, slice, metric, value, ci_low, ci_high, n."""
        rows = pd.DataFrame(self.metrics.get("aggregate") or [], columns=list(AGGREGATE_COLUMNS))
        for column in ("value", "ci_low", "ci_high"):
            rows[column] = pd.to_numeric(rows[column], errors="coerce").astype(float)
        return rows

    def per_query_frame(self) -> pd.DataFrame:
        """Every per-question metric of results.jsonl: query_id, retriever, k, metric, value (NaN when null)."""
        records = [
            (row["query_id"], row["retriever"], row["k"], metric, np.nan if value is None else float(value))
            for row in self.results
            for metric, value in (row.get("metrics") or {}).items()
        ]
        return pd.DataFrame(records, columns=["query_id", "retriever", "k", "metric", "value"])

    def judgment_frame(self) -> pd.DataFrame:
        """Every judgement of results.jsonl: query_id, retriever, k, judge, score (NaN when none), replicate and
        judge_input_sha256 (None in runs written before it was recorded, or where the judge was not called)."""
        return judgment_frame(self.results)

    def stage_frame(self) -> pd.DataFrame:
        """Latency and cost per stage: stage, retriever, k, query_id, latency_s, cost_usd (NaN when not recorded).
        Retrieval happens once per (question, retriever) whatever k, so its rows carry k = NaN."""
        records, seen = [], set()
        for row in self.results:
            latency, cost = row.get("latency_s") or {}, row.get("cost_usd") or {}
            for stage in STAGES:
                if latency.get(stage) is None and cost.get(stage) is None:
                    continue
                k = row["k"]
                if stage == "retrieval":
                    if (row["query_id"], row["retriever"]) in seen:
                        continue
                    seen.add((row["query_id"], row["retriever"]))
                    k = None
                records.append((stage, row["retriever"], k, row["query_id"], latency.get(stage), cost.get(stage)))
        frame = pd.DataFrame(records, columns=["stage", "retriever", "k", "query_id", "latency_s", "cost_usd"])
        for column in ("k", "latency_s", "cost_usd"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
        return frame


def judged_table_frame(judged: pd.DataFrame) -> pd.DataFrame:
    """judgment_frame of a judged_answers table, the digests as its results rows will carry them: for what is
    summed up before (and apart from) the rows, which are made once, as they are written."""
    return judgment_frame({"query_id": j["query_id"], "retriever": j["retriever"], "k": int(j["k"]),
                           "judgments": [_judgment_record(j)]} for j in judged.to_dict("records"))


def judgment_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Every judgement of results rows (results_rows, or results.jsonl read back): JUDGMENT_FRAME_COLUMNS."""
    records = [
        (row["query_id"], row["retriever"], row["k"], j.get("judge"),
         np.nan if j.get("score") is None else float(j["score"]), int(j.get("replicate") or 0),
         j.get("judge_input_sha256"))
        for row in results
        for j in row.get("judgments") or []
    ]
    return pd.DataFrame(records, columns=list(JUDGMENT_FRAME_COLUMNS))


def run_config(versions: VersionTuple, **extra: Any) -> dict[str, Any]:
    """The config.json of a run: the version tuple, its config_hash and any further settings given."""
    return {VERSION_TUPLE_KEY: versions.as_dict(), "config_hash": versions.config_hash, **extra}


def metrics_document(
    aggregate: pd.DataFrame,
    not_computed: pd.DataFrame | None = None,
    operational: Mapping[str, Any] | None = None,
    call_health: pd.DataFrame | None = None,
    unresolved_gold: Mapping[str, Any] | None = None,
    judges: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `metrics` of write_run from the aggregate table (metrics/aggregate.py columns; metric "weighted_score"
    rows, when present, are what the comparison gate reads), the (metric, reason) rows of metrics not computed (with
    retriever and k where the reason is one cell's), free-form operational figures (error counts, token totals,
    ...), the health of the calls behind the answer metrics (metrics/call_health.py), which the gate reads, and the
    gold labels that resolved to nothing (corpus/gold.py GoldResolution.unresolved_document) and what the judges
    are worth (judging/summary.py JudgesSummary.as_json), when the run was judged."""
    missing = [c for c in AGGREGATE_COLUMNS if c not in aggregate.columns]
    if missing:
        raise InputError([InputProblem("aggregate", None, c, "missing column") for c in missing])
    document: dict[str, Any] = {"aggregate": jsonable(aggregate[list(AGGREGATE_COLUMNS)].to_dict("records"))}
    if not_computed is not None:
        document["not_computed"] = jsonable(_reasons(not_computed))
    if operational:
        document["operational"] = jsonable(dict(operational))
    if call_health is not None and len(call_health):
        document["call_health"] = jsonable(call_health.to_dict("records"))
    if unresolved_gold and unresolved_gold["labels"]:
        document[UNRESOLVED_GOLD] = jsonable(dict(unresolved_gold))
    if judges is not None:
        document[JUDGES] = jsonable(dict(judges))
    return document


def _reasons(not_computed: pd.DataFrame) -> list[dict[str, Any]]:
    """(metric, reason) records; a reason that only some (retriever, k) cells have keeps its cells, one record each."""
    if "retriever" not in not_computed.columns:
        return not_computed[["metric", "reason"]].drop_duplicates().to_dict("records")
    cells = set(zip(not_computed["retriever"], not_computed["k"]))
    records = []
    for (metric, reason), group in not_computed.groupby(["metric", "reason"], sort=False):
        mine = list(dict.fromkeys(zip(group["retriever"], group["k"])))
        if set(mine) == cells:
            records.append({"metric": metric, "reason": reason})
        else:
            records += [{"retriever": r, "k": k, "metric": metric, "reason": reason} for r, k in mine]
    return records


def results_rows(
    questions: pd.DataFrame,
    retrieval_results: pd.DataFrame,
    chunks: pd.DataFrame,
    per_query_metrics: pd.DataFrame,
    answers: pd.DataFrame | None = None,
    judgments: pd.DataFrame | None = None,
) -> Iterator[dict[str, Any]]:
    """One row per (question, retriever, k) present in `per_query_metrics` or `answers`, in question order, yielded
    one at a time: with texts kept whole, ten thousand questions' rows would otherwise be held together (save_run
    keeps only their cut copies).

    `questions` is the evalset table (id, question, type, weight, ...); the retrieved list is the retriever's first k
    results in rank order, with the chunk's rel_path, heading_path, page and text; texts are kept whole here
    (write_run cuts them). `judgments` may carry latency_s / cost_usd columns; they are then the judging stage's.
    """
    grid = per_query_metrics[["retriever", "k"]]
    if answers is not None:
        grid = pd.concat([grid, answers[["retriever", "k"]]])
    cells = sorted({(str(r), int(k)) for r, k in grid.itertuples(index=False)})

    chunk_info = chunks.set_index("chunk_id")[["rel_path", "heading_path", "page", "text"]]
    chunk_info = chunk_info[~chunk_info.index.duplicated()]
    ordered = retrieval_results.sort_values(["retriever", "query_id", "rank"], kind="stable")
    # A service under test's results carry their own chunk fields; ours come from the chunk table.
    own = [c for c in chunk_info.columns if c in ordered.columns]
    ordered = ordered.join(chunk_info, on="chunk_id", suffixes=("", "_chunks"))
    for column in own:
        ordered[column] = ordered[column].where(ordered[column].notna(), ordered[f"{column}_chunks"])
    retrieved: dict[tuple[str, str], list[dict[str, Any]]] = {}
    retrieval_latency: dict[tuple[str, str], float] = {}
    for (retriever, query_id), group in ordered.groupby(["retriever", "query_id"], sort=False):
        retrieved[(retriever, query_id)] = [
            {
                "rank": r.rank,
                "chunk_id": r.chunk_id,
                "doc_id": r.doc_id,
                "rel_path": r.rel_path,
                "heading_path": r.heading_path,
                "page": r.page,
                "score": r.score,
                "score_lexical": getattr(r, "score_lexical", None),
                "score_semantic": getattr(r, "score_semantic", None),
                "text": r.text,
            }
            for r in group.itertuples(index=False)
        ]
        if "latency_s" in group.columns:
            retrieval_latency[(retriever, query_id)] = group["latency_s"].iloc[0]

    metric_values: dict[tuple[str, str, int], dict[str, float]] = {}
    for r in per_query_metrics.itertuples(index=False):
        metric_values.setdefault((r.query_id, r.retriever, int(r.k)), {})[r.metric] = r.value
    answer_rows = {} if answers is None else _by_cell(answers)
    judgment_rows = {} if judgments is None else _group_by_cell(judgments)

    for q in questions.to_dict("records"):
        query_id = q["id"]
        for retriever, k in cells:
            cell = (query_id, retriever, k)
            if cell not in metric_values and cell not in answer_rows:
                continue
            answer = answer_rows.get(cell)
            judged = judgment_rows.get(cell, [])
            latency = {"retrieval": retrieval_latency.get((retriever, query_id))}
            cost: dict[str, Any] = {}
            if answer is not None:
                latency["generation"] = answer.get("latency_s")
                cost["generation"] = answer.get("cost_usd")
            if judged and "latency_s" in judged[0]:
                latency["judging"] = sum(j["latency_s"] or 0.0 for j in judged)
            if judged and "cost_usd" in judged[0]:
                cost["judging"] = sum(j["cost_usd"] or 0.0 for j in judged)
            yield jsonable(
                {
                    "query_id": query_id,
                    "question": q.get("question"),
                    "type": q.get("type"),
                    "weight": q.get("weight", 1.0),
                    "retriever": retriever,
                    "k": k,
                    "retrieved": retrieved.get((retriever, query_id), [])[:k],
                    "answer": None if answer is None else _answer_record(answer),
                    "judgments": [_judgment_record(j) for j in judged],
                    "latency_s": latency,
                    "cost_usd": cost,
                    "metrics": metric_values.get(cell, {}),
                }
            )


def _by_cell(frame: pd.DataFrame) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(r["query_id"], r["retriever"], int(r["k"])): r for r in frame.to_dict("records")}


def _group_by_cell(frame: pd.DataFrame) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    grouped: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in frame.to_dict("records"):
        grouped.setdefault((r["query_id"], r["retriever"], int(r["k"])), []).append(r)
    return grouped


def _answer_record(answer: dict[str, Any]) -> dict[str, Any]:
    record = {"text": answer.get("answer")}
    record.update({name: _parsed(name, answer.get(name)) for name in _ANSWER_FIELDS if name in answer})
    return record


def _judgment_record(judgment: dict[str, Any]) -> dict[str, Any]:
    record = {
        name: _parsed(name, value)
        for name, value in judgment.items()
        if name not in ("query_id", "retriever", "k", "latency_s", "cost_usd")
    }
    # Before results.jsonl cuts texts to 200 characters: a person's grade (labeling/grades.py) is keyed by the whole
    # judge input, and a later run or a comparison finds it again by this digest.
    if isinstance(judgment.get("judge_input"), str) and judgment["judge_input"]:
        record["judge_input_sha256"] = judge_input_sha256(judgment["judge_input"])
    return record


def _parsed(name: str, value: Any) -> Any:
    """The tables keep nested values as JSON text; a run row keeps them as JSON."""
    if name in _JSON_TEXT_FIELDS and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars as Python numbers, NaN / inf / NA as None, tuples and arrays as lists.
    Anything else that JSON cannot hold is left for json.dumps to refuse."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def truncate_texts(value: Any, limit: int = TEXT_LIMIT) -> Any:
    """Every string longer than `limit` cut to `limit` characters, the last being "…"; values of identifier keys
    (`id`, `*_id`) are kept whole so runs stay joinable."""
    if isinstance(value, dict):
        return {k: v if _is_identifier(k) else truncate_texts(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [truncate_texts(v, limit) for v in value]
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + ELLIPSIS
    return value


def _is_identifier(key: str) -> bool:
    return key == "id" or key.endswith("_id")


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (`version_tuple.judge.model`); lists stay values."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            flat.update(flatten(item, name + "."))
        else:
            flat[name] = item
    return flat


def save_run(
    runs_dir: str | Path,
    *,
    results: Iterable[Mapping[str, Any]],
    metrics: Mapping[str, Any],
    config: Mapping[str, Any],
    description: str | None = None,
    previous_run_id: str | None = None,
    documents: Callable[[Run], Mapping[str, str]] = lambda run: {},
    store_full_text: bool = False,
    run_id: str | None = None,
    now: datetime | None = None,
    replace: bool = False,
    status: Mapping[str, Any] | None = None,
) -> Path:
    """Write a run directory and return its path.

    `results`: rows as made by results_rows (any iterable, read once); `metrics`: as made by metrics_document; `config`: the full
    configuration (run_config). `documents(run)` gives the files made from the run as it will be read back (the
    summary, the comparison with its baseline: reports/run_directory.py), written with the rest.
    Without `run_id` the id is the UTC time (`now`, default the current time) with -2, -3, ... appended while taken;
    an explicit `run_id` that is taken raises FileExistsError, unless `replace` (a re-execution rewriting its run).
    `status` (runs/status.py) is written with the rest, so a rewritten run never keeps its old status.
    """
    runs_dir = Path(runs_dir)
    if "aggregate" not in metrics:
        raise InputError([InputProblem("metrics", None, "aggregate", "missing (build it with metrics_document)")])
    if run_id is not None and not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be letters, digits, '_', '.', '-' and not start with '.' or '-', got {run_id!r}")
    created = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    # The documents are made from this config, so they hold no credential either.
    clean_config = redact(drop_secrets(jsonable(dict(config))))
    rows = [jsonable(dict(r)) if store_full_text else truncate_texts(jsonable(dict(r))) for r in results]
    runs_dir.mkdir(parents=True, exist_ok=True)
    stem = run_id or created.strftime(RUN_ID_FORMAT)
    names = [stem] if run_id is not None else chain([stem], (f"{stem}-{n}" for n in count(2)))
    for name in names:
        target = runs_dir / name
        if target.exists() and not replace:
            continue
        document = {
            **jsonable(dict(metrics)),
            "run": {
                "run_id": name,
                "created_at": created.strftime(TIMESTAMP_FORMAT),
                "description": description,
                "previous_run_id": previous_run_id,
            },
        }
        files = {
            METRICS_FILE: json_text(document),
            CONFIG_FILE: json_text(clean_config, sort_keys=True),
            **documents(Run(target, rows, document, clean_config, "")),
        }
        if status is not None:
            files[RUN_STATUS_FILE] = json_text(dict(status))
        if _write_atomically(runs_dir, target, rows, files, replace=replace):
            return target
    raise FileExistsError(f"run {runs_dir / stem} already exists")


def json_text(content: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=2, sort_keys=sort_keys) + "\n"


def _write_atomically(runs_dir: Path, target: Path, rows: list[dict[str, Any]], files: dict[str, str], *,
                      replace: bool = False) -> bool:
    """Write results.jsonl and `files` (name -> text) into a hidden temporary directory and rename it to `target`;
    False when `target` appeared in the meantime (another writer took the id). With `replace` an existing `target`
    is moved aside first and deleted once the new one is in place; files of it that the new run does not write
    (report.html, charts, accepted.json) move over, so that a rewritten run keeps them until they are redone."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=runs_dir))
    tmp.chmod(RUN_DIR_MODE)
    try:
        with (tmp / RESULTS_FILE).open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if replace and target.exists():
            for old in target.iterdir():
                if not (tmp / old.name).exists():
                    old.rename(tmp / old.name)
            old_dir = target.rename(runs_dir / f".{target.name}.old")
            tmp.rename(target)
            shutil.rmtree(old_dir)
            return True
        try:
            # rename refuses a non-empty target; an empty directory someone created meanwhile is not a run.
            tmp.rename(target)
        except OSError:
            if target.exists():
                return False
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return True


def read_run(path: str | Path) -> Run:
    """The run in directory `path`; InputError naming every missing or unreadable file (and line)."""
    path = Path(path)
    problems: list[InputProblem] = []
    documents: dict[str, Any] = {}
    for name in (METRICS_FILE, CONFIG_FILE):
        file = path / name
        try:
            documents[name] = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(InputProblem(str(file), None, None, "missing: not a run directory"))
        except json.JSONDecodeError as exc:
            problems.append(InputProblem(str(file), exc.lineno, None, f"invalid JSON: {exc.msg}"))
    rows: list[dict[str, Any]] = []
    results_file = path / RESULTS_FILE
    if results_file.is_file():
        with results_file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    problems.append(InputProblem(str(results_file), number, None, f"invalid JSON: {exc.msg}"))
    else:
        problems.append(InputProblem(str(results_file), None, None, "missing: not a run directory"))
    if problems:
        raise InputError(problems)
    summary_file = path / SUMMARY_FILE
    summary = summary_file.read_text(encoding="utf-8") if summary_file.is_file() else ""
    comparison_file = path / COMPARISON_JSON
    comparison = json.loads(comparison_file.read_text(encoding="utf-8")) if comparison_file.is_file() else None
    return Run(path, rows, documents[METRICS_FILE], documents[CONFIG_FILE], summary, comparison)


def list_runs(runs_dir: str | Path) -> list[Path]:
    """The complete runs under `runs_dir`, newest first (by metrics.json's created_at, then id), ignoring hidden
    entries and directories without a readable metrics.json."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    candidates = []
    for path in runs_dir.iterdir():
        if path.name.startswith(".") or not (path / METRICS_FILE).is_file():
            continue
        try:
            created = (json.loads((path / METRICS_FILE).read_text(encoding="utf-8")).get("run") or {}).get("created_at")
        except json.JSONDecodeError:
            continue
        candidates.append((created or "", _id_order(path.name), path))
    return [path for *_, path in sorted(candidates, reverse=True)]


def latest_run(runs_dir: str | Path, eval_set_version: str | None = None) -> Path | None:
    """The most recently created complete run under `runs_dir` (of `eval_set_version` when given), or None."""
    for path in list_runs(runs_dir):
        if eval_set_version is None or run_eval_set_version(path) == eval_set_version:
            return path
    return None


def run_eval_set_version(path: Path) -> str | None:
    return config_value(_config(path), EVAL_SET_VERSION_KEY)


def run_of_pipeline(runs_dir: str | Path, root_run_id: str) -> Path | None:
    """The run directory written by Dagster run `root_run_id` or by a re-execution of it, if any."""
    for path in list_runs(runs_dir):
        if _config(path).get(PIPELINE_RUN_KEY) == root_run_id:
            return path
    return None


def _config(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _id_order(name: str) -> tuple[str, int]:
    """`20251218_063617-10` after `20251218_063617-2`."""
    stem, _, suffix = name.rpartition("-")
    return (stem, int(suffix)) if stem and suffix.isdigit() else (name, 1)


def config_value(config: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted key of a nested config, None when any part is absent."""
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
