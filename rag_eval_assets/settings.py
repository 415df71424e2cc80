"""The project configuration file (`rag_eval.yaml`) as one typed model: what corpus, evalset and grid a deployment
evaluates.

Each package keeps its own sections (corpus/, evalset/, generation/, llm/, retrieval/, runs/ and verdict/ settings.py;
execution_settings.py); this module composes them with the sections that span packages (report, alerts). Relative
paths are resolved against the directory of the configuration file, so the same file works from any working
directory. Every problem is reported at once, naming the file and the dotted key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rag_eval_assets.corpus.settings import ChunkingSettings, CorpusSettings
from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.evalset.settings import DevSubsetSettings, EvalsetSettings
from rag_eval_assets.execution_settings import ExecutionSettings
from rag_eval_assets.generation.settings import AnsweringSettings, JudgeSettings, QueryGenerationSettings
from rag_eval_assets.llm.settings import ROLES, LLMSettings
from rag_eval_assets.metrics.settings import RagasSettings
import rag_eval_assets.retrieval.kinds  # noqa: F401  registers the retriever kinds
from rag_eval_assets.retrieval.registry import KINDS, Chunkings, Variant, resolve_variants
from rag_eval_assets.retrieval.sweep import DEFAULT_MAX_VARIANTS
from rag_eval_assets.retrieval.settings import RetrievalSettings
from rag_eval_assets.runs.settings import RetentionSettings
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets.settings_base import (ConfigPath, KValues, Loc, Section, at_least, problem, problems,
                                           relative_to_config)

__all__ = ["CONFIG_ENV_VAR", "Settings", "default_config_path", "load_settings"]

CONFIG_ENV_VAR = "RAG_EVAL_CONFIG"
DEFAULT_CONFIG_NAME = "rag_eval.yaml"


def _storage(storage_dir: str, info: ValidationInfo) -> str:
    """A local path resolved like any other; an fsspec URL (s3://...) as written."""
    return storage_dir if "://" in storage_dir else str(relative_to_config(Path(storage_dir), info))


class ReportSettings(Section):
    # shown in summary.md; generated from the change against the previous run if unset
    description: StrictStr | None = None
    store_full_text: StrictBool = False  # results.jsonl keeps texts whole instead of cutting them to 200 characters
    baseline_run_id: StrictStr | None = None  # compare against this run; default: the newest run of the same evalset
    gate: GateSettings = GateSettings()  # the gate metric per cell and the noise-aware failure rule (verdict/)


def _webhook_variable(name: str) -> str:
    if not name:
        raise problem("required: the name of the environment variable holding the webhook URL")
    return name


class AlertSettings(Section):
    # The incoming-webhook URL is a secret: only the name of the environment variable holding it is configured.
    webhook_url_env: Annotated[StrictStr, AfterValidator(_webhook_variable)] = Field("", validate_default=True)
    # verdicts (worse, incompatible); failed: failed or canceled nightly runs and failed `rag-eval run`s
    on: tuple[Literal["worse", "incompatible", "failed"], ...] = ("worse", "failed")

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        # YAML 1.1 reads the bare key `on` as the boolean true.
        if isinstance(data, dict) and True in data:
            return {("on" if key is True else key): value for key, value in data.items()}
        return data


class Settings(Section):
    # local path or fsspec URL; assets/ and frozen/ live under it
    storage_dir: Annotated[StrictStr, AfterValidator(_storage)] = Field("data", validate_default=True)
    corpus: CorpusSettings
    evalset: EvalsetSettings
    chunking: ChunkingSettings = ChunkingSettings()
    dev_subset: DevSubsetSettings = DevSubsetSettings()
    # A list of kinds, or a mapping of names to a kind and its parameters: resolved into `variants` by the registry.
    retriever_spec: Annotated[Any, BeforeValidator(lambda v: tuple(v) if isinstance(v, list) else v)] = Field(
        ("bm25", "dense", "hybrid"), alias="retrievers")
    # Grids of retriever parameters expanded into named variants beside `retrievers:` (retrieval/sweep.py); with a
    # sweep and no `retrievers:`, the sweep's variants alone.
    sweep: Any = None
    sweep_max_variants: Annotated[StrictInt, at_least(1)] = DEFAULT_MAX_VARIANTS
    k_values: KValues = (1, 3, 5, 10, 20)
    retrieval: RetrievalSettings = RetrievalSettings()
    # every role's endpoint unless its section names its own (answering.llm, judge.llm, query_generation.llm,
    # ragas.llm); None with none of them: the offline pipeline, LLM-only metrics reported as not computed
    llm: LLMSettings | None = None
    answering: AnsweringSettings = AnsweringSettings()
    judge: JudgeSettings = JudgeSettings()
    query_generation: QueryGenerationSettings = QueryGenerationSettings()
    ragas: RagasSettings = RagasSettings()
    report: ReportSettings = ReportSettings()
    alerts: AlertSettings | None = None
    retention: RetentionSettings = RetentionSettings()
    execution: ExecutionSettings = ExecutionSettings()  # where the steps of the fanning-out jobs execute
    # data/runs/<run_id>/ (seed 002); a local directory even for remote storage
    runs_dir: ConfigPath = Field(None, validate_default=True)

    # Where the file lies is not a key of the file: load_settings passes it in the validation context.
    _config_file: Path = PrivateAttr()
    _variants: dict[str, Variant] = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        if not context:
            raise TypeError("Settings are made by load_settings(path): their paths are relative to that file")
        self._config_file = context["config_file"]
        sections = {kind: getattr(self.retrieval, kind).model_dump() for kind in KINDS if hasattr(self.retrieval, kind)}
        spec = self.retriever_spec if "retriever_spec" in self.model_fields_set or self.sweep is None else None
        self._variants = resolve_variants(spec, sections, Chunkings(ChunkingSettings, self.chunking), self.sweep,
                                          self.sweep_max_variants)[0]

    def llm_for(self, role: str) -> LLMSettings | None:
        """The endpoint of `role` (llm/settings.py ROLES): its section's own `llm`, else the top-level one."""
        return getattr(self, ROLES[role]).llm or self.llm

    def llm_key(self, role: str) -> str:
        """The dotted key of the `llm` section `role` uses, for messages: `judge.llm` or `llm`."""
        return f"{ROLES[role]}.llm" if getattr(self, ROLES[role]).llm is not None else "llm"

    @field_validator("runs_dir", mode="before")
    @classmethod
    def _runs_under_storage(cls, runs_dir: Any, info: ValidationInfo) -> Any:
        if runs_dir is not None:
            return runs_dir
        storage = info.data.get("storage_dir", "data")  # absent only when storage_dir itself failed
        return "data/runs" if "://" in storage else _join(storage, "runs")

    @classmethod
    def cross_field_problems(cls, data: dict) -> list[tuple[Loc, str]]:
        found: list[tuple[Loc, str]] = []
        depth, answer_ks = cls.valid_alone(data, "k_values"), cls.valid_alone(data, "answering", "k_values")
        if depth and answer_ks and max(answer_ks) > max(depth):
            found.append((("answering", "k_values"),
                          f"must be a non-empty list of integers from 1 to max(k_values) = {max(depth)}"))
        if cls.valid_alone(data, "answering", "answerer") == "llm" and data.get("llm") is None and (
                data.get("answering") or {}).get("llm") is None:
            found.append((("answering", "answerer"), "'llm' needs an llm section (base_url, model), top-level or "
                                                     "answering.llm"))
        retrieval = data.get("retrieval") or {}
        sections = {kind: retrieval.get(kind) or {} for kind in KINDS} if isinstance(retrieval, dict) else {}
        # A section's own errors are reported by its model: variants are checked against valid sections only.
        # A section's own errors are reported by its model; variants inherit only the values that are valid alone.
        valid = {kind: {key: value for key, value in values.items()
                        if key in KINDS[kind].Params.model_fields
                        and (value is None or cls.valid_alone(data, "retrieval", kind, key) is not None)}
                 for kind, values in sections.items() if isinstance(values, dict)}
        sweep = data.get("sweep")
        default = None if sweep is not None else cls.model_fields["retriever_spec"].default
        chunking = cls.valid_alone(data, "chunking") or ChunkingSettings()
        variants, variant_problems = resolve_variants(
            data.get("retrievers", default), valid, Chunkings(ChunkingSettings, chunking), sweep,
            cls.valid_alone(data, "sweep_max_variants") or DEFAULT_MAX_VARIANTS)
        found += variant_problems
        gated = cls.valid_alone(data, "report", "gate", "retrievers")
        unknown = [name for name in gated or () if name not in variants]
        if unknown and not variant_problems:
            found.append((("report", "gate", "retrievers"),
                          f"names no retriever of this run: {', '.join(unknown)} (retrievers: {', '.join(variants)})"))
        return found

    @property
    def retrievers(self) -> tuple[str, ...]:
        """The names of the run's retrievers, in the order written."""
        return tuple(self._variants)

    @property
    def variants(self) -> dict[str, Variant]:
        """The retrievers of a run by name (each a retriever partition), in the order written."""
        return self._variants

    def chunking_of(self, retriever: str) -> ChunkingSettings:
        """The chunking retriever `retriever` searches: its own, else the top-level one."""
        return self._variants[retriever].chunking or self.chunking

    @property
    def chunk_sets(self) -> dict[str, ChunkingSettings]:
        """The chunkings of the variants that are not the top-level one, by key (`300-50`): each has its own
        chunks, gold labels and indexes, built once however many variants search them."""
        return {v.chunk_set: v.chunking for v in self._variants.values() if v.chunk_set is not None}

    @property
    def config_file(self) -> Path:
        return self._config_file

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


def _laid_over(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(data)
    for key, value in overrides.items():
        below = merged.get(key)
        merged[key] = _laid_over(below, value) if isinstance(value, Mapping) and isinstance(below, dict) else value
    return merged


def default_config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV_VAR) or Path.cwd() / DEFAULT_CONFIG_NAME).resolve()


def load_settings(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings of configuration file `path`, with `overrides` (nested sections, e.g. the spot-check's
    {"judge": {"replicates": 1}}) laid over the file's values before they are checked."""
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
    data = _laid_over(data, overrides or {})
    try:
        return Settings.model_validate(data, context={"config_file": config_file})
    except ValidationError as exc:
        found = dict.fromkeys(problems(exc, Settings))  # a section and a variant inheriting it may say the same
        raise InputError([InputProblem(name, None, key, message) for key, message in found]) from None
