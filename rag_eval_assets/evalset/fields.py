"""Typed reading of one JSON object's fields, recording a problem per bad field instead of stopping.

A bad field reads as its default so the rest of the record (and file) is still checked; the caller
raises once with every problem. A key given as null reads like a missing key.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from typing import Any

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.records import json_type


class Fields:
    """The fields of `obj`, found at `line` of `file`; nested objects report as `prefix` + name."""

    def __init__(self, file: str, line: int, obj: dict[str, Any], problems: list[InputProblem], prefix: str = ""):
        self.file = file
        self.line = line
        self.obj = obj
        self.problems = problems
        self.prefix = prefix

    def path(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def problem(self, name: str, message: str) -> None:
        self.problems.append(InputProblem(self.file, self.line, self.path(name), message))

    def given(self, name: str) -> bool:
        return self.obj.get(name) is not None

    def nested(self, name: str, obj: dict[str, Any]) -> Fields:
        return Fields(self.file, self.line, obj, self.problems, prefix=f"{self.path(name)}.")

    def _required(self, name: str) -> bool:
        if self.given(name):
            return True
        self.problem(name, "required field is missing" if name not in self.obj else "required field is null")
        return False

    def text(self, name: str, *, required: bool = False, nonblank: bool = False) -> str | None:
        if not (self._required(name) if required else self.given(name)):
            return None
        value = self.obj[name]
        if not isinstance(value, str):
            self.problem(name, f"expected a string, got {json_type(value)}")
            return None
        if nonblank and not value.strip():
            self.problem(name, "must not be empty or whitespace only")
            return None
        return value

    def choice(self, name: str, allowed: Collection[str], *, required: bool = False) -> str | None:
        value = self.text(name, required=required)
        if value is not None and value not in allowed:
            self.problem(name, f"{value!r} is not one of {', '.join(allowed)}")
            return None
        return value

    def boolean(self, name: str, default: bool) -> bool:
        if not self.given(name):
            return default
        value = self.obj[name]
        if not isinstance(value, bool):
            self.problem(name, f"expected true or false, got {json_type(value)} {value!r}")
            return default
        return value

    def positive_number(self, name: str, default: float) -> float:
        if not self.given(name):
            return default
        value = self.obj[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem(name, f"expected a number, got {json_type(value)} {value!r}")
            return default
        if not (math.isfinite(value) and value > 0):
            self.problem(name, f"must be a finite number > 0, got {value!r}")
            return default
        return float(value)

    def optional_int(self, name: str) -> int | None:
        if not self.given(name):
            return None
        value = self.obj[name]
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(name, f"expected an integer, got {json_type(value)} {value!r}")
            return None
        return value

    def _array(self, name: str, required: bool) -> list[Any] | None:
        if not (self._required(name) if required else self.given(name)):
            return None
        value = self.obj[name]
        if not isinstance(value, list):
            self.problem(name, f"expected an array, got {json_type(value)}")
            return None
        return value

    def texts(self, name: str, *, required: bool = False, nonblank: bool = False) -> tuple[str, ...]:
        """An array of strings; `nonblank` rejects empty items (an empty match string matches every answer)."""
        items = self._array(name, required)
        return () if items is None else self._string_items(name, items, nonblank)

    def _string_items(self, name: str, items: list[Any], nonblank: bool) -> tuple[str, ...]:
        good: list[str] = []
        for i, item in enumerate(items):
            if not isinstance(item, str):
                self.problem(f"{name}[{i}]", f"expected a string, got {json_type(item)}")
            elif nonblank and not item.strip():
                self.problem(f"{name}[{i}]", "must not be empty or whitespace only")
            else:
                good.append(item)
        return tuple(good)

    def string_groups(self, name: str) -> tuple[tuple[str, ...], ...]:
        """Seed 000 OR-groups: each item is a string (a group of one) or a non-empty array of strings."""
        items = self._array(name, required=False) or []
        groups: list[tuple[str, ...]] = []
        for i, item in enumerate(items):
            where = f"{name}[{i}]"
            if isinstance(item, str):
                if item.strip():
                    groups.append((item,))
                else:
                    self.problem(where, "must not be empty or whitespace only")
            elif isinstance(item, list):
                if item:
                    groups.append(self._string_items(where, item, nonblank=True))
                else:
                    self.problem(where, "an OR-group must not be empty")
            else:
                self.problem(where, f"expected a string or an array of strings, got {json_type(item)}")
        return tuple(groups)

    def objects(self, name: str, *, required: bool = False) -> Iterator[Fields]:
        """An array of objects, each as its own Fields reporting as name[i].field; lazy, so problems stay in
        item order when the caller reads each item before the next."""
        for i, item in enumerate(self._array(name, required) or []):
            if isinstance(item, dict):
                yield Fields(self.file, self.line, item, self.problems, prefix=f"{self.path(name)}[{i}].")
            else:
                self.problem(f"{name}[{i}]", f"expected an object, got {json_type(item)}")

    def obj_field(self, name: str, *, required: bool = False) -> Fields | None:
        if not (self._required(name) if required else self.given(name)):
            return None
        value = self.obj[name]
        if not isinstance(value, dict):
            self.problem(name, f"expected an object, got {json_type(value)}")
            return None
        return self.nested(name, value)
