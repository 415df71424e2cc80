"""What every settings model shares: frozen, no unknown keys, range checks whose messages name the bound, checks
across fields reported beside every other error, paths relative to the configuration file, and the way a pydantic
ValidationError becomes (dotted key, message) pairs: `retrieval.bm25.b`, `retrievers[1]`, `alerts.on[0]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    StrictInt,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]
# The error type of every check written here; its message is final.
_OWN = "settings"


def problem(message: str) -> PydanticCustomError:
    return PydanticCustomError(_OWN, "{message}", {"message": message})


def _range(ok: Callable[[Any], bool], bound: str) -> AfterValidator:
    def check(value: Any) -> Any:
        if not ok(value):
            raise problem(f"must be {bound}, got {value}")
        return value

    return AfterValidator(check)


def at_least(low: float, note: str = "") -> AfterValidator:
    return _range(lambda v: v >= low, f">= {low}" + (f" {note}" if note else ""))


def above(low: float) -> AfterValidator:
    return _range(lambda v: v > low, f"> {low}")


def between(low: float, high: float, *, open: bool = False) -> AfterValidator:
    """low <= value <= high, or low < value < high when `open`; the message says "between" either way."""
    return _range(lambda v: low < v < high if open else low <= v <= high, f"between {low} and {high}")


def relative_to_config(path: Path, info: ValidationInfo) -> Path:
    # load_settings passes the configuration file in the validation context.
    if path.is_absolute() or not info.context:
        return path
    return (info.context["config_file"].parent / path).resolve()


ConfigPath = Annotated[Path, AfterValidator(relative_to_config)]


def _positive_ks(ks: tuple[int, ...]) -> tuple[int, ...]:
    if not ks or min(ks) < 1:
        raise problem("must be a non-empty list of positive integers")
    return tuple(sorted(set(ks)))


KValues = Annotated[tuple[StrictInt, ...], AfterValidator(_positive_ks)]


class Section(BaseModel):
    """A mapping of rag_eval.yaml. Unknown keys are errors, loaded settings never change, and error texts never
    quote inputs (a URL may carry a credential) unless a check's own message does."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(cls, data: Any, handler: Callable[[Any], Section]) -> Section:
        found = [InitErrorDetails(type=problem(message), loc=loc, input=data)
                 for loc, message in (cls.cross_field_problems(data) if isinstance(data, dict) else [])]
        try:
            validated = handler(data)
        except ValidationError as exc:
            raise ValidationError.from_exception_data(cls.__name__, [*map(_again, exc.errors()), *found]) from None
        if found:
            raise ValidationError.from_exception_data(cls.__name__, found)
        return validated

    @classmethod
    def cross_field_problems(cls, data: dict) -> list[tuple[Loc, str]]:
        """Checks that need several fields: (location, message) for each problem of the raw mapping `data`. They run
        even when other fields fail, so that one load reports every problem; `valid_alone` gives them typed values."""
        return []

    @classmethod
    def valid_alone(cls, data: Any, *path: str) -> Any:
        """The value at `path` of the raw mapping `data`, validated alone as that field (its default when absent);
        None when it is invalid: that error is reported by the whole validation."""
        name, *rest = path
        if not isinstance(data, dict):
            return None
        field = cls.model_fields[name]
        if name not in data:
            value = field.get_default(call_default_factory=True)
            for part in rest:
                value = getattr(value, part, None)
            return value
        if rest:
            return _section_of(field.annotation).valid_alone(data[name], *rest)
        kind = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
        try:
            return TypeAdapter(kind).validate_python(data[name])
        except ValidationError:
            return None


def _again(error: ErrorDetails) -> InitErrorDetails:
    """A caught error, ready to be raised again beside others (an error of a custom type must be rebuilt)."""
    if error["type"] == _OWN:
        return InitErrorDetails(type=problem(error["ctx"]["message"]), loc=error["loc"], input=error["input"])
    return error  # type: ignore[return-value]


def _section_of(annotation: Any) -> type[Section] | None:
    """The settings model an annotation holds (`LLMSettings | None` holds LLMSettings), or None."""
    return next((t for t in (annotation, *get_args(annotation)) if isinstance(t, type) and issubclass(t, Section)),
                None)


def _section_at(root: type[Section], loc: Sequence[str | int]) -> type[Section] | None:
    section: type[Section] | None = root
    for part in loc:
        field = section.model_fields.get(part) if section and isinstance(part, str) else None
        section = _section_of(field.annotation) if field else None
    return section


def dotted(loc: Sequence[str | int]) -> str:
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else part
    return key


def problems(exc: ValidationError, root: type[Section]) -> list[tuple[str, str]]:
    """(dotted key, message) for every error of a validation of `root`, in the order pydantic found them."""
    return [(dotted(e["loc"]), _message(e, root)) for e in exc.errors()]


def _message(error: ErrorDetails, root: type[Section]) -> str:
    kind, value, loc = error["type"], error.get("input"), error["loc"]
    if kind == _OWN:
        return error["ctx"]["message"]
    if kind == "missing":
        return "required section is missing" if _section_at(root, loc) else "required key is missing"
    if kind == "extra_forbidden":
        parent = _section_at(root, loc[:-1])
        return f"unknown key; valid keys: {', '.join(parent.model_fields)}" if parent else "unknown key"
    if kind == "literal_error":  # pydantic lists the choices as "'a', 'b' or 'c'"
        choices = re.findall(r"'([^']*)'", error["ctx"]["expected"])
        return f"{value!r} is not one of {', '.join(choices)}"
    if kind in ("model_type", "dict_type"):
        return f"expected a mapping, got {type(value).__name__}"
    if kind.endswith("_type"):
        return f"wrong type {type(value).__name__}"
    return error["msg"]
