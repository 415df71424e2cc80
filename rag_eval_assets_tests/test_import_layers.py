"""The package's imports, read from the source: no two modules import each other (directly or round a circle), and
no module imports one above its station (the run store below the verdict, the verdict below the reports, the
reports below the Dagster wiring, the Dagster wiring below the code location and the command line)."""

from __future__ import annotations

import ast
from pathlib import Path

import rag_eval_assets

ROOT = Path(rag_eval_assets.__file__).parent
# A module of the first group never imports one of the second.
BELOW = [
    ("rag_eval_assets.runs.", ("rag_eval_assets.verdict.compare", "rag_eval_assets.verdict.gate",
                               "rag_eval_assets.verdict.paired", "rag_eval_assets.verdict.joint",
                               "rag_eval_assets.verdict.ranking", "rag_eval_assets.reports.")),
    ("rag_eval_assets.verdict.", ("rag_eval_assets.reports.",)),
    # The evaluation's parts sit below what compares, grades and reports them.
    *((f"rag_eval_assets.{part}.", ("rag_eval_assets.runs.", "rag_eval_assets.verdict.", "rag_eval_assets.reports.",
                                    "rag_eval_assets.labeling.", "rag_eval_assets.judging."))
      for part in ("corpus", "evalset", "retrieval", "metrics", "generation", "llm")),
    ("rag_eval_assets.", ("rag_eval_assets.defs.", "rag_eval_assets.cli", "rag_eval_assets.definitions")),
    # The code location (definitions.py) and the command line (the cli package) are built from defs/.
    ("rag_eval_assets.defs.", ("rag_eval_assets.definitions", "rag_eval_assets.cli")),
]
# The modules that may import dagster: defs/, definitions.py and every module of the cli package.
DAGSTER_ALLOWED = ("rag_eval_assets.defs.", "rag_eval_assets.cli", "rag_eval_assets.definitions")


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """Every module of the package (or `dagster`) that `path` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in known or m == "dagster" or m.startswith("dagster.")}


def test_no_import_circle() -> None:
    known = modules()
    graph = {name: {m for m in imports(path, known) if m in known and m != name} for name, path in known.items()}
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_no_module_imports_one_above_it() -> None:
    known = modules()
    wrong = []
    for name, path in known.items():
        for target in imports(path, known):
            for low, high in BELOW:
                allowed_here = low == "rag_eval_assets." and name.startswith(DAGSTER_ALLOWED)
                if name.startswith(low) and target.startswith(high) and not allowed_here:
                    wrong.append(f"{name} -> {target}")
            if target.split(".")[0] == "dagster" and not name.startswith(DAGSTER_ALLOWED):
                wrong.append(f"{name} -> {target}")
    assert wrong == []
