"""Input errors that name the file, the line (or array index) and the field."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputProblem:
    """One problem in one input file. `line` is 1-based for JSONL/TSV, the array index for JSON arrays."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f": field '{self.field}'"
        return f"{where}: {self.message}"


class InputError(ValueError):
    """Raised with every problem found in an input, not just the first."""

    def __init__(self, problems: list[InputProblem]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in input:\n{lines}")


class InfrastructureError(Exception):
    """The cluster or the store the configuration names cannot be used (defs/infrastructure.py): one line per
    problem, each naming the setting and where it points, never a secret."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))
