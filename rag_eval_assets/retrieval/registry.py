"""The retriever registry: every kind of retriever (bm25, dense, hybrid, http, ...) in one place, and the named
variants of rag_eval.yaml resolved against it.

A kind declares its settings model (pydantic, extra keys forbidden), the indexes it searches (each need carries the
index family that builds it, retrieval/index_families.py), its role in a fusion, whether it brings its own chunks
and answers (a service under test), and how to build a retriever from built indexes. Nothing outside this module
and the kinds' own modules dispatches on a kind's name or an index family's: adding a kind, with an index of its
own or not, is its module, one line in `kinds/__init__.py` and its documentation (docs/architecture.md, "Retriever
kinds").

A variant is a name (the retriever partition) plus a kind and its parameters: `retrievers: [bm25, dense]` names each
variant after its kind with the `retrieval.<kind>` section as parameters; the mapping form
`bm25_tuned: {kind: bm25, k1: 1.2}` overrides that section's values for one variant, and may give the variant a
chunking of its own (`chunking: {chunk_size_chars: 300}`, validated by the model the caller passes: the settings'
ChunkingSettings). A `sweep:` grid (retrieval/sweep.py) adds generated variants in the same mapping form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

import pandas as pd
from pydantic import BaseModel, ValidationError

from rag_eval_assets.redaction import redact
from rag_eval_assets.retrieval.index_families import IndexNeed
from rag_eval_assets.retrieval.retrievers import Retriever
from rag_eval_assets.retrieval.sweep import CHUNKING, DEFAULT_MAX_VARIANTS, expand_sweep
from rag_eval_assets.retrieval.topk import ROLES
from rag_eval_assets.settings_base import problems as section_problems

# A variant name is a partition key and a file name: no separators, no spaces.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str
    params: BaseModel
    parts: tuple[Variant, ...] = ()  # the variants a fusion combines
    # the parameters the variant sets itself in `retrievers:`; the others come from `retrieval.<kind>`
    own: frozenset[str] = field(default=frozenset(), compare=False)
    # Its own chunking (a ChunkingSettings), None: the top-level `chunking`. `chunk_set` names the chunks it searches
    # when they are not the top-level chunking's (their key, "300-50"), None when they are.
    chunking: BaseModel | None = None
    chunk_set: str | None = None

    def setting(self, parameter: str) -> str:
        """The dotted key of rag_eval.yaml that `parameter` of this variant was written under."""
        return f"retrievers.{self.name}.{parameter}" if parameter in self.own else f"retrieval.{self.kind}.{parameter}"

    def version(self) -> dict[str, Any]:
        """The retriever part of the version tuple: name, kind and every parameter, the parts' included."""
        # Redacted: a service's base_url may carry a password or a token, and versions are written everywhere.
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, **redact(self.params.model_dump(mode="json"))}
        if self.chunking is not None:
            out["chunking"] = self.chunking.model_dump(mode="json")
        if self.parts:
            out["of"] = [part.version() for part in self.parts]
        return out


@dataclass
class BuiltIndexes:
    """What building a retriever may use: the built index of each need, the chunk table and corpus language."""

    chunks: pd.DataFrame
    language: str
    get: Callable[[IndexNeed], Any]


class RetrieverKind(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    own_answers: ClassVar[bool]  # a service under test: its retrieval and answers come from one call per question
    # Its part in a fusion (topk.ROLES: "lexical" or "semantic", whose scores fill score_<role>); None: not fusable.
    role: ClassVar[str | None]

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        """(parameter, why) for what the model's types cannot say (an address that could not be sent as written)."""

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]: ...

    def build(self, variant: Variant, indexes: BuiltIndexes) -> Retriever:
        """Our own retrievers: search the built indexes."""

    def respond(self, variant: Variant, texts: Sequence[str], depth: int,
                folders: Sequence[Sequence[str]] | None) -> list[Any]:
        """A service under test (own_answers): one call per question, each a SutResponse or the exception that
        ended the call; never raises for one question's failure."""

    def check_environment(self, variant: Variant) -> None:
        """A service under test (own_answers): read what the variant's parameters name in the environment (a key,
        headers) as `respond` reads it; raises credentials.CredentialError for a variable that is unset or
        unusable. Preflight calls it before any input is written."""


KINDS: dict[str, RetrieverKind] = {}


def register(kind: RetrieverKind) -> RetrieverKind:
    KINDS[kind.name] = kind
    return kind


def kind_of(variant: Variant) -> RetrieverKind:
    return KINDS[variant.kind]


def needs_of(variants: Mapping[str, Variant], language: str) -> list[IndexNeed]:
    """Every index some variant searches, once each, in a stable order: one per need and chunk set, so that
    variants of one chunking share its indexes (BM25 variants differing in k1 and b share one index of term
    counts)."""
    seen: dict[tuple[str, str, str], IndexNeed] = {}
    for variant in variants.values():
        for need in kind_of(variant).needs(variant, language):
            need = replace(need, chunk_set=variant.chunk_set)
            first = seen.setdefault((need.name, need.key, need.chunk_set or ""), need)
            if first.family is not need.family:
                raise ValueError(f"two different index families are named {need.name!r}: a family's name is its "
                                 "asset's, so it must be unique")
    return [seen[key] for key in sorted(seen)]


def own_answer_variants(variants: Mapping[str, Variant]) -> list[str]:
    return [name for name, v in variants.items() if kind_of(v).own_answers]


Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Chunkings:
    """How variants' `chunking:` is read: `model` validates one (its instances have a `key`, "300-50"), `default`
    is the top-level chunking."""

    model: type[BaseModel]
    default: BaseModel


def resolve_variants(raw: object, sections: Mapping[str, Mapping[str, Any]], chunkings: Chunkings,
                     sweep: object = None, max_variants: int = DEFAULT_MAX_VARIANTS,
                     ) -> tuple[dict[str, Variant], list[tuple[Loc, str]]]:
    """`retrievers:` (a list of kind names, or a mapping name -> {kind, parameters}) and the variants `sweep:`
    generates (retrieval/sweep.py) resolved into variants, with (location, message) for every problem found.
    `sections[kind]` holds the `retrieval.<kind>` values every variant of that kind starts from. A fusion's `of`
    names other variants, or kinds (their `retrieval.<kind>` defaults, and the fusion's chunking): a fusion ranks
    the units of one chunking, so its parts must share it."""
    declared: dict[str, tuple[str, dict[str, Any], Loc]] = {}  # name -> (kind, overrides, location)
    generated, problems = expand_sweep(sweep, max_variants)
    if sweep is not None and raw is None:
        raw = {}  # a sweep alone: no default retrievers beside it
    if isinstance(raw, (list, tuple)):
        if not raw or len(set(map(str, raw))) != len(raw):
            problems.append((("retrievers",), "must be a non-empty list without duplicates"))
        for i, name in enumerate(raw):
            if name not in KINDS:
                problems.append((("retrievers", i), f"{name!r} is not one of {', '.join(KINDS)}"))
            else:
                declared[name] = (name, {}, ("retrievers", i))
    elif isinstance(raw, dict):
        if not raw and not generated:
            problems.append((("retrievers",), "must name at least one retriever"))
        for name, spec in raw.items():
            loc: Loc = ("retrievers", str(name))
            if not isinstance(name, str) or not NAME_PATTERN.match(name):
                problems.append((loc, "a retriever name is letters, digits, '_', '-' or '.' (at most 64, not "
                                      "starting with '-' or '.')"))
                continue
            if not isinstance(spec, dict) or "kind" not in spec:
                problems.append((loc, f"expected a mapping with `kind` (one of {', '.join(KINDS)})"))
                continue
            overrides = dict(spec)
            kind = overrides.pop("kind")
            if kind not in KINDS:
                problems.append(((*loc, "kind"), f"{kind!r} is not one of {', '.join(KINDS)}"))
                continue
            declared[name] = (kind, overrides, loc)
    else:
        problems.append((("retrievers",), f"wrong type {type(raw).__name__}"))
    written = {name for name in (raw if isinstance(raw, (list, tuple, dict)) else ())}
    for name, (spec, loc) in generated.items():  # the sweep's variants join those written in `retrievers:`
        overrides = dict(spec)
        kind = overrides.pop("kind")
        if name in written:
            problems.append((loc, f"generates {name!r}, a name retrievers.{name} already has"))
        elif not NAME_PATTERN.match(name):
            problems.append((loc, f"generates the name {name!r}, longer than 64 characters: give the grid a shorter "
                                  "`name`"))
        elif kind not in KINDS:
            problems.append(((*loc, "kind"), f"{kind!r} is not one of {', '.join(KINDS)}"))
        else:
            declared[name] = (kind, overrides, loc)

    resolved: dict[str, Variant] = {}

    def chunking_of(overrides: dict[str, Any], loc: Loc) -> tuple[BaseModel | None, bool]:
        """The variant's own chunking (None: the top-level one), and whether it is valid."""
        if CHUNKING not in overrides:
            return None, True
        try:
            return chunkings.model.model_validate(overrides.pop(CHUNKING)), True
        except ValidationError as exc:
            problems.extend(((*loc, CHUNKING, *key.split(".")), message)
                            for key, message in section_problems(exc, chunkings.model))
            return None, False

    def params_of(kind: str, overrides: dict[str, Any], loc: Loc) -> BaseModel | None:
        def at(field_name: str) -> Loc:
            # A value the variant set is its own problem; one it inherited belongs to retrieval.<kind>.
            return loc if field_name in overrides else ("retrieval", kind)

        params_model = KINDS[kind].Params
        try:
            params = params_model(**{**sections.get(kind, {}), **overrides})
        except ValidationError as exc:
            for key, message in section_problems(exc, params_model):
                first = key.split(".")[0].split("[")[0]
                problems.append(((*at(first), *key.split(".")) if key else loc, message))
            return None
        found = KINDS[kind].problems(params)
        problems.extend(((*at(field_name), field_name), why) for field_name, why in found)
        return None if found else params

    def resolve(name: str, trail: tuple[str, ...], inherited: BaseModel | None = None) -> Variant | None:
        if name in resolved:
            return resolved[name]
        kind, overrides, loc = declared[name] if name in declared else (name, {}, ("retrieval", name))
        overrides = dict(overrides)
        chunking, valid = chunking_of(overrides, loc)
        params = params_of(kind, overrides, loc)
        if params is None or not valid:
            return None
        if name not in declared:  # a kind named as a fusion's part searches the fusion's chunks
            chunking = inherited
        effective = chunking if chunking is not None else chunkings.default
        parts: list[Variant] = []
        for i, part in enumerate(getattr(params, "of", None) or ()):
            at: Loc = (*loc, "of", i) if "of" in overrides else ("retrieval", kind, "of", i)
            if part in trail:
                problems.append((at, f"{part!r} fuses itself"))
            elif part not in declared and part not in KINDS:
                problems.append((at, f"{part!r} is neither a retriever of this file nor a kind ({', '.join(KINDS)})"))
            else:
                got = resolve(part, trail + (part,), chunking)
                if got is not None and KINDS[got.kind].role not in ROLES:
                    problems.append((at, f"{part!r} ({got.kind}) cannot be fused: it gives no score of its own"))
                elif got is not None and (got.chunking or chunkings.default) != effective:
                    problems.append((at, f"{part!r} is chunked {_chunked(got.chunking or chunkings.default)}, this "
                                         f"fusion {_chunked(effective)}: a fusion ranks the chunks of one chunking, "
                                         "so its parts must share it (give them the same `chunking`)"))
                elif got is not None:
                    parts.append(got)
        roles = [KINDS[p.kind].role for p in parts]
        if len(set(roles)) != len(roles):
            problems.append(((*loc, "of"), "a fusion combines one lexical and one semantic retriever"))
        chunk_set = None if effective == chunkings.default else effective.key
        variant = Variant(name, kind, params, tuple(parts), frozenset(overrides), chunking, chunk_set)
        if name in declared:
            resolved[name] = variant
        return variant

    variants = {name: v for name in declared if (v := resolve(name, (name,))) is not None}
    return variants, list(dict.fromkeys(problems))


def _chunked(chunking: BaseModel) -> str:
    return ", ".join(f"{key}={value}" for key, value in chunking.model_dump().items())
