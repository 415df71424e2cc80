"""The project configuration file (`rag_eval.yaml`): what corpus, evalset and grid a deployment evaluates.

Relative paths are resolved against the directory of the configuration file, so the same file works from
any working directory. Every problem is reported at once, naming the file and the dotted key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
import yaml

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.http_retry import RetryPolicy
from rag_eval_assets.llm.settings import SCHEMA_MODES, LLMSettings
from rag_eval_assets.metrics.rule_score import DEFAULT_CITATION_PATTERN
from rag_eval_assets.retrieval.registry import KINDS
from rag_eval_assets.retrieval.registry import Variant, resolve_variants
import rag_eval_assets.retrieval.kinds  # noqa: F401  (registers the kinds)
from rag_eval_assets.runs.gate import CORRECTIONS, GateSettings

CONFIG_ENV_VAR = "RAG_EVAL_CONFIG"
DEFAULT_CONFIG_NAME = "rag_eval.yaml"


@dataclass(frozen=True)
class CorpusSettings:
    id: str
    path: Path
    language: str = "multi"


@dataclass(frozen=True)
class ChunkingSettings:
    chunk_size_chars: int = 800
    overlap_chars: int = 100


@dataclass(frozen=True)
class EvalsetSettings:
    name: str
    path: Path
    format: str | None = None
    strict_gold: bool = False  # gold that resolves to nothing fails the gold_resolves check as ERROR, stopping the run


@dataclass(frozen=True)
class DevSubsetSettings:
    size: int = 100
    seed: int = 0


@dataclass(frozen=True)
class Bm25Settings:
    k1: float = 0.9  # Lucene / Anserini defaults
    b: float = 0.4
    variant: str = "lucene"


@dataclass(frozen=True)
class DenseSettings:
    model: str = "all-MiniLM-L6-v2"  # packaged offline; "use-multilingual-v3", a local path or a cached model id


@dataclass(frozen=True)
class HybridSettings:
    method: str = "rrf"  # rrf | convex
    rrf_k: int = 60
    alpha: float = 0.5  # convex: weight of the bm25 side
    candidate_depth: int = 100


@dataclass(frozen=True)
class HttpSettings:
    """A system under test that follows seed 002's debug contract."""

    base_url: str = ""
    path: str = "/api/v1/ask"
    api_key_env: str | None = None  # name of the environment variable holding the key; the key is never stored
    # name of the environment variable holding a JSON object of extra request headers (they may carry secrets)
    headers_env: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    max_attempts: int = 5


@dataclass(frozen=True)
class RetrievalSettings:
    level: str = "chunk"  # chunk | doc (doc: BEIR-comparable, each document's best chunk)
    folder_filter: bool = False  # search each question only under its `folders` (seed 002); adds scope_miss_rate
    bm25: Bm25Settings = Bm25Settings()
    dense: DenseSettings = DenseSettings()
    hybrid: HybridSettings = HybridSettings()
    http: HttpSettings = HttpSettings()


@dataclass(frozen=True)
class AnsweringSettings:
    # extractive (offline, no LLM) | llm, for our retrievers; the http retriever's partitions always take the
    # service's own answer, abstention flag and references (seed 002).
    answerer: str = "extractive"
    k_values: tuple[int, ...] = (5, 10)  # the k dimension of the answer grid: top-k chunks given to the answerer
    citation_pattern: str = DEFAULT_CITATION_PATTERN  # seed 000's "стр. N"; e.g. r"\bp\.\s*\d+" or r"第\d+页"
    adapter_id: str | None = None  # seed 003: the fine-tuned adapter (or registry model id) behind the answerer


@dataclass(frozen=True)
class JudgeSettings:
    enabled: bool = True  # judges run only when an llm endpoint is configured
    replicates: int = 0  # > 0: judge a sample again this many times and report self-agreement
    replicate_sample: int = 10


@dataclass(frozen=True)
class QueryGenerationSettings:
    n_chunks: int = 10  # chunks sampled (seeded, spread across documents) for seed 004 query generation
    seed: int = 0


@dataclass(frozen=True)
class ReportSettings:
    description: str | None = None  # shown in summary.md; generated from the change against the previous run if unset
    store_full_text: bool = False  # results.jsonl keeps texts whole instead of cutting them to 200 characters
    baseline_run_id: str | None = None  # compare against this run; default: the newest run of the same evalset
    gate: GateSettings = GateSettings()  # the gate metric per cell and the noise-aware failure rule (runs/gate.py)


ALERT_EVENTS = ("worse", "incompatible", "failed")


@dataclass(frozen=True)
class AlertSettings:
    # The incoming-webhook URL is a secret: only the name of the environment variable holding it is configured.
    webhook_url_env: str
    on: tuple[str, ...] = ("worse", "failed")  # verdicts (worse, incompatible) and failed or canceled nightly runs


@dataclass(frozen=True)
class RetentionSettings:
    keep_runs: int | None = None  # run directories kept per evalset (runs accepted by hand and the baseline always)


@dataclass(frozen=True)
class Settings:
    config_file: Path
    storage_dir: str  # local path or fsspec URL; assets/ and frozen/ live under it
    corpus: CorpusSettings
    evalset: EvalsetSettings
    chunking: ChunkingSettings = ChunkingSettings()
    dev_subset: DevSubsetSettings = DevSubsetSettings()
    retrievers: tuple[str, ...] = ("bm25", "dense", "hybrid")  # the variant names, in the order configured
    variants: Mapping[str, Variant] = field(default_factory=dict)  # name -> kind and parameters (retrieval/registry.py)
    k_values: tuple[int, ...] = (1, 3, 5, 10, 20)
    retrieval: RetrievalSettings = RetrievalSettings()
    llm: LLMSettings | None = None  # None: the offline pipeline; LLM-only metrics are reported as not computed
    answering: AnsweringSettings = AnsweringSettings()
    judge: JudgeSettings = JudgeSettings()
    query_generation: QueryGenerationSettings = QueryGenerationSettings()
    report: ReportSettings = ReportSettings()
    alerts: AlertSettings | None = None
    retention: RetentionSettings = RetentionSettings()
    runs_dir: Path = Path("data/runs")  # data/runs/<run_id>/ (seed 002); a local directory even for remote storage

    @property
    def assets_dir(self) -> str:
        return _join(self.storage_dir, "assets")

    @property
    def frozen_dir(self) -> Path:
        return self._local("frozen")

    @property
    def generated_dir(self) -> Path:
        return self._local("generated")

    @property
    def cache_dir(self) -> Path:
        return self._local("cache")

    def _local(self, name: str) -> Path:
        # Frozen copies, caches and generated files are local files (SQLite needs a local disk); with an
        # object-store storage_dir they live under data/ beside the configuration file.
        if "://" in self.storage_dir:
            return self.config_file.parent / "data" / name
        return Path(_join(self.storage_dir, name))


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def default_config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV_VAR) or Path.cwd() / DEFAULT_CONFIG_NAME).resolve()


_SECTIONS = {
    "storage_dir": str,
    "corpus": dict,
    "evalset": dict,
    "chunking": dict,
    "dev_subset": dict,
    "retrievers": (list, dict),
    "k_values": list,
    "retrieval": dict,
    "llm": dict,
    "answering": dict,
    "judge": dict,
    "query_generation": dict,
    "report": dict,
    "alerts": dict,
    "retention": dict,
    "runs_dir": str,
}
_SECTION_KEYS = {
    "corpus": {"id": str, "path": str, "language": str},
    "evalset": {"name": str, "path": str, "format": (str, type(None)), "strict_gold": bool},
    "chunking": {"chunk_size_chars": int, "overlap_chars": int},
    "dev_subset": {"size": int, "seed": int},
}
_NUMBER = (int, float)
_RETRIEVAL_KEYS = {
    "level": str,
    "folder_filter": bool,
    "bm25": {"k1": _NUMBER, "b": _NUMBER, "variant": str},
    "dense": {"model": str},
    "hybrid": {"method": str, "rrf_k": int, "alpha": _NUMBER, "candidate_depth": int},
    "http": {
        "base_url": str,
        "path": str,
        "api_key_env": (str, type(None)),
        "headers_env": (str, type(None)),
        "connect_timeout": _NUMBER,
        "read_timeout": _NUMBER,
        "max_attempts": int,
    },
}
_LLM_KEYS = {
    "base_url": str,
    "model": str,
    "api_key_env": (str, type(None)),
    "temperature": _NUMBER,
    "seed": int,
    "max_tokens": int,
    "connect_timeout": _NUMBER,
    "read_timeout": _NUMBER,
    "max_concurrency": int,
    "max_error_rate": _NUMBER,
    "retry": {"max_attempts": int, "base_delay": _NUMBER, "max_delay": _NUMBER},
    "schema_mode": str,
    "price_per_1k": dict,
}
_ANSWER_KEYS = {
    "answering": {"answerer": str, "k_values": list, "citation_pattern": str, "adapter_id": (str, type(None))},
    "judge": {"enabled": bool, "replicates": int, "replicate_sample": int},
    "query_generation": {"n_chunks": int, "seed": int},
    "alerts": {"webhook_url_env": str, "on": list},
    "retention": {"keep_runs": (int, type(None))},
    "report": {
        "description": (str, type(None)),
        "store_full_text": bool,
        "baseline_run_id": (str, type(None)),
        "gate": {
            "metric": str,
            "retrieval_metric": str,
            "min_delta": _NUMBER,
            "max_regressions": (int, type(None)),
            "alpha": _NUMBER,
            "correction": str,
            "significant_only": bool,
        },
    },
}
_CHOICES = {
    "llm.schema_mode": SCHEMA_MODES,
    "answering.answerer": ("extractive", "llm"),
    "retrieval.level": ("chunk", "doc"),
    "retrieval.hybrid.method": ("rrf", "convex"),
    "retrieval.bm25.variant": ("lucene", "okapi", "atire"),
    "report.gate.correction": CORRECTIONS,
}
_REQUIRED = {"corpus": ("id", "path"), "evalset": ("name", "path")}


def load_settings(path: str | Path | None = None) -> Settings:
    config_file = Path(path).resolve() if path else default_config_path()
    name = str(config_file)
    if not config_file.is_file():
        raise InputError([InputProblem(name, None, None, f"configuration file not found (set {CONFIG_ENV_VAR})")])
    try:
        data = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        line = exc.problem_mark.line + 1 if getattr(exc, "problem_mark", None) else None
        raise InputError([InputProblem(name, line, None, f"invalid YAML: {exc}")]) from exc
    if not isinstance(data, dict):
        raise InputError([InputProblem(name, None, None, "the top level must be a mapping")])

    alerts = data.get("alerts")
    if isinstance(alerts, dict) and True in alerts:
        # YAML 1.1 reads the bare key `on` as the boolean true.
        alerts["on"] = alerts.pop(True)
    problems: list[InputProblem] = []

    def bad(key: str, message: str) -> None:
        problems.append(InputProblem(name, None, key, message))

    for key, value in data.items():
        expected = _SECTIONS.get(key)
        if expected is None:
            bad(key, f"unknown key; valid keys: {', '.join(_SECTIONS)}")
        elif not isinstance(value, expected):
            bad(key, f"expected {getattr(expected, '__name__', 'a list or a mapping')}, got {type(value).__name__}")
    for section, keys in _SECTION_KEYS.items():
        values = data.get(section)
        if not isinstance(values, dict):
            if section in _REQUIRED and section not in data:
                bad(section, "required section is missing")
            continue
        for key, value in values.items():
            if key not in keys:
                bad(f"{section}.{key}", f"unknown key; valid keys: {', '.join(keys)}")
            elif not isinstance(value, keys[key]) or (isinstance(value, bool) and keys[key] is not bool):
                bad(f"{section}.{key}", f"wrong type {type(value).__name__}")
        for key in _REQUIRED.get(section, ()):
            if key not in values:
                bad(f"{section}.{key}", "required key is missing")
    retrieval = data.get("retrieval") or {}
    if isinstance(retrieval, dict):
        _check_nested(retrieval, _RETRIEVAL_KEYS, "retrieval", bad)
    llm = data.get("llm")
    if isinstance(llm, dict):
        _check_nested(llm, _LLM_KEYS, "llm", bad)
        for key in ("base_url", "model"):
            if key not in llm:
                bad(f"llm.{key}", "required key is missing")
    for section, keys in _ANSWER_KEYS.items():
        if isinstance(data.get(section), dict):
            _check_nested(data[section], keys, section, bad)
    answering = data.get("answering") or {}
    answerer = answering.get("answerer", "extractive") if isinstance(answering, dict) else None
    pattern = answering.get("citation_pattern") if isinstance(answering, dict) else None
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as exc:
            bad("answering.citation_pattern", f"not a regular expression: {exc}")
    if answerer == "llm" and not isinstance(llm, dict):
        bad("answering.answerer", "'llm' needs an llm section (base_url, model)")
    sections = {kind: retrieval.get(kind) or {} for kind in KINDS} if isinstance(retrieval, dict) else {}
    variants, variant_problems = resolve_variants(data.get("retrievers", list(Settings.retrievers)), sections)
    for problem in variant_problems:
        bad(problem.key, problem.message)
    k_values = data.get("k_values", list(Settings.k_values))
    if isinstance(k_values, list):
        k_ok = bool(k_values) and all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in k_values)
        if not k_ok:
            bad("k_values", "must be a non-empty list of positive integers")
        answer_ks = answering.get("k_values", list(AnsweringSettings.k_values)) if isinstance(answering, dict) else []
        if isinstance(answer_ks, list) and k_ok:
            depth = max(k_values, default=0)
            if not answer_ks or any(not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= depth
                                    for k in answer_ks):
                bad("answering.k_values", f"must be a non-empty list of integers from 1 to max(k_values) = {depth}")
    if isinstance(alerts, dict):
        if not alerts.get("webhook_url_env"):
            bad("alerts.webhook_url_env", "required: the name of the environment variable holding the webhook URL")
        events = alerts.get("on", list(AlertSettings.on))
        for i, event in enumerate(events if isinstance(events, list) else []):
            if event not in ALERT_EVENTS:
                bad(f"alerts.on[{i}]", f"{event!r} is not one of {', '.join(ALERT_EVENTS)}")
    retention = data.get("retention") or {}
    keep = retention.get("keep_runs") if isinstance(retention, dict) else None
    if isinstance(keep, int) and keep < 1:
        bad("retention.keep_runs", f"must be >= 1 (or null: keep every run), got {keep}")
    gate = _gate_settings(data.get("report"))
    # Ranges are checked only on values of the right type.
    if gate is not None and not any((p.field or "").startswith("report.gate") for p in problems):
        for key, message in gate.problems():
            bad(f"report.gate.{key}", message)
    chunking = data.get("chunking") or {}
    if isinstance(chunking, dict):
        size = chunking.get("chunk_size_chars", ChunkingSettings.chunk_size_chars)
        overlap = chunking.get("overlap_chars", ChunkingSettings.overlap_chars)
        if isinstance(size, int) and isinstance(overlap, int) and not (size > 0 and 0 <= overlap < size):
            bad("chunking.overlap_chars", "need chunk_size_chars > 0 and 0 <= overlap_chars < chunk_size_chars")
    if problems:
        raise InputError(problems)

    base = config_file.parent

    def resolve(p: str) -> Path:
        return (base / p).resolve() if not Path(p).is_absolute() else Path(p)

    storage = data.get("storage_dir", "data")
    storage_dir = storage if "://" in storage else str(resolve(storage))
    corpus, evalset = data["corpus"], data["evalset"]
    return Settings(
        config_file=config_file,
        storage_dir=storage_dir,
        corpus=CorpusSettings(corpus["id"], resolve(corpus["path"]), corpus.get("language", "multi")),
        evalset=EvalsetSettings(
            evalset["name"], resolve(evalset["path"]), evalset.get("format"), evalset.get("strict_gold", False)
        ),
        chunking=ChunkingSettings(**data.get("chunking", {})),
        dev_subset=DevSubsetSettings(**data.get("dev_subset", {})),
        retrievers=tuple(variants),
        variants=variants,
        k_values=tuple(sorted(set(k_values))),
        retrieval=RetrievalSettings(
            level=retrieval.get("level", "chunk"),
            folder_filter=retrieval.get("folder_filter", False),
            bm25=Bm25Settings(**retrieval.get("bm25", {})),
            dense=DenseSettings(**retrieval.get("dense", {})),
            hybrid=HybridSettings(**retrieval.get("hybrid", {})),
            http=HttpSettings(**retrieval.get("http", {})),
        ),
        llm=_llm_settings(llm, name) if isinstance(llm, dict) else None,
        answering=AnsweringSettings(
            answerer=answering.get("answerer", "extractive"),
            k_values=tuple(sorted(set(answering.get("k_values", AnsweringSettings.k_values)))),
            citation_pattern=answering.get("citation_pattern", AnsweringSettings.citation_pattern),
            adapter_id=answering.get("adapter_id"),
        ),
        judge=JudgeSettings(**data.get("judge", {})),
        query_generation=QueryGenerationSettings(**data.get("query_generation", {})),
        report=ReportSettings(**{**data.get("report", {}), "gate": gate or GateSettings()}),
        alerts=AlertSettings(alerts["webhook_url_env"], tuple(alerts.get("on", AlertSettings.on)))
        if isinstance(alerts, dict) else None,
        retention=RetentionSettings(**retention),
        runs_dir=resolve(data["runs_dir"]) if "runs_dir" in data else _default_runs_dir(storage_dir, base),
    )


def _gate_settings(report: object) -> GateSettings | None:
    """report.gate as GateSettings; None when absent or when its keys already failed the type checks."""
    gate = report.get("gate") if isinstance(report, dict) else None
    if not isinstance(gate, dict):
        return None
    try:
        return GateSettings(**gate)
    except TypeError:
        return None


def _default_runs_dir(storage_dir: str, config_dir: Path) -> Path:
    return config_dir / "data" / "runs" if "://" in storage_dir else Path(storage_dir) / "runs"


def _llm_settings(values: dict, config_file: str) -> LLMSettings:
    values = dict(values)
    if "retry" in values:
        try:
            values["retry"] = RetryPolicy(**values["retry"])
        except ValueError as exc:
            raise InputError([InputProblem(config_file, None, "llm.retry", str(exc))]) from exc
    if "price_per_1k" in values:
        values["price_per_1k"] = {model: tuple(price) for model, price in values["price_per_1k"].items()}
    try:
        return LLMSettings(**values)
    except (TypeError, ValueError) as exc:
        raise InputError([InputProblem(config_file, None, "llm", str(exc))]) from exc


def _check_nested(values: dict, schema: dict, prefix: str, bad) -> None:
    for key, value in values.items():
        dotted = f"{prefix}.{key}"
        expected = schema.get(key)
        if expected is None:
            bad(dotted, f"unknown key; valid keys: {', '.join(schema)}")
        elif isinstance(expected, dict):
            if isinstance(value, dict):
                _check_nested(value, expected, dotted, bad)
            else:
                bad(dotted, f"expected a mapping, got {type(value).__name__}")
        elif not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            bad(dotted, f"wrong type {type(value).__name__}")
        elif dotted in _CHOICES and value not in _CHOICES[dotted]:
            bad(dotted, f"{value!r} is not one of {', '.join(_CHOICES[dotted])}")
