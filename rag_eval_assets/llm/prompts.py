"""A versioned prompt: its sha256 pins the exact text, so a stored result names the prompt that made it."""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Prompt:
    """`user_template` (and `system`) use str.format fields, e.g. "Question: {question}"; write a literal
    brace as {{ or }} (JSON examples in a prompt need this)."""

    name: str
    version: str
    system: str
    user_template: str

    def __post_init__(self) -> None:
        if not self.name or not self.version:
            raise ValueError(f"a prompt needs a name and a version, got name={self.name!r} version={self.version!r}")
        if not self.user_template.strip():
            raise ValueError(f"prompt {self.name}@{self.version} has an empty user_template")
        for text in (self.system, self.user_template):
            _fields(text)  # a malformed template fails here, at definition, not at the first render

    @cached_property
    def sha256(self) -> str:
        canonical = json.dumps(
            {"name": self.name, "version": self.version, "system": self.system, "user_template": self.user_template},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def fields(self) -> frozenset[str]:
        return _fields(self.system) | _fields(self.user_template)

    def render(self, **values: object) -> list[dict[str, str]]:
        """Chat messages: the system message (left out when `system` is empty), then the user message."""
        missing = self.fields - values.keys()
        if missing:
            raise ValueError(f"prompt {self.name}@{self.version} needs values for {sorted(missing)}")
        messages = [{"role": "system", "content": self.system.format(**values)}] if self.system else []
        messages.append({"role": "user", "content": self.user_template.format(**values)})
        return messages


def _fields(template: str) -> frozenset[str]:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"malformed template ({exc}): {template[:80]!r}") from exc
    names = set()
    for _, name, _, _ in parsed:
        if name is None:
            continue
        if not name or not name.isidentifier():
            # Positional fields and attribute/index access would make render(**values) ambiguous.
            raise ValueError(f"template fields must be plain names, got {{{name}}} in {template[:80]!r}")
        names.add(name)
    return frozenset(names)
