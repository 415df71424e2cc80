"""README's five-minute tour, run as written on a copy of the sample data: every command of its `console` blocks
(`$ ...`) is run in order, and every output line shown under it must be among the command's real output lines, in
the same order. Run ids, Dagster run ids, times and the checkout's path are the only things normalised; a line
`…` stands for lines left out. An example that drifts from what the code prints fails here."""

from __future__ import annotations

import os
import re
import shutil
import sys

from rag_eval_assets_tests.sample_config import REPO
from rag_eval_assets_tests.waiting import run_to_end

README = REPO / "README.md"
TOUR = "## A five-minute tour"
# README shows the checkout as this path; the copy the tour runs in stands for it.
CHECKOUT = "/path/to/rag-eval-assets"
RUN_ID = re.compile(r"\b\d{8}_\d{6}(?:-\d+)?\b")
DAGSTER_RUN_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\b")
LEFT_OUT = "…"


def tour_steps(text: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) for every `$ ` line of the tour's console blocks, in order."""
    steps: list[tuple[str, list[str]]] = []
    fence = None  # the opening line of the code block we are in
    for line in text.split(TOUR, 1)[1].splitlines():
        if line.startswith("```"):
            fence = None if fence else line
        elif fence is None and line.startswith("## "):
            break  # the next section
        elif fence == "```console" and line.startswith("$ "):
            steps.append((line[2:], []))
        elif fence == "```console" and line.strip():
            assert steps, f"output before any command in README's tour: {line!r}"
            steps[-1][1].append(line.rstrip())
    return steps


def make_run_recipe() -> str:
    """What `make run` runs (the Makefile's run target): the tour runs the same, with the same environment."""
    recipe = re.search(r"^run:.*\n\t(.+)$", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    assert recipe, "the Makefile has no run target"
    return recipe.group(1)


def first_not_printed(shown: list[str], real: list[str]) -> str | None:
    """The first line of `shown` (but `…`) not found in `real` after the lines shown before it; None when all are."""
    lines = iter(real)
    return next((line for line in shown if line != LEFT_OUT and line not in lines), None)


def test_the_tour_in_the_readme_prints_what_the_readme_shows(tmp_path):
    steps = tour_steps(README.read_text(encoding="utf-8"))
    commands = [command for command, _ in steps]
    assert commands.count("make run") >= 2 and any(c.startswith(".venv/bin/rag-eval compare") for c in commands)
    assert make_run_recipe() == "DAGSTER_HOME=$(DAGSTER_HOME) RAG_EVAL_CONFIG=$(CONFIG) $(VENV)/bin/rag-eval run"

    checkout = tmp_path / "rag-eval-assets"
    (checkout / "data").mkdir(parents=True)
    shutil.copy(REPO / "rag_eval.yaml", checkout)
    shutil.copytree(REPO / "data" / "sample", checkout / "data" / "sample")
    # What make's $(INSTANCE) target does before `make run`: the project's instance settings in the home.
    (checkout / ".dagster_home").mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", checkout / ".dagster_home" / "dagster.yaml")
    rag_eval = f"{sys.executable} -m rag_eval_assets.cli"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           # Make's defaults for `make run`: the configuration here and the Dagster home beside it.
           "DAGSTER_HOME": str(checkout / ".dagster_home"), "RAG_EVAL_CONFIG": str(checkout / "rag_eval.yaml")}
    # README's run ids in the order it names them stand for the runs the tour makes, in the order they are made.
    readme_ids = list(dict.fromkeys(RUN_ID.findall("\n".join(c + "\n" + "\n".join(s) for c, s in steps))))
    made: list[str] = []

    def real_run_id(match: re.Match) -> str:
        return made[readme_ids.index(match.group(0))]

    def normalised(line: str) -> str:
        line = line.replace(str(checkout), CHECKOUT)
        line = RUN_ID.sub(lambda m: readme_ids[made.index(m.group(0))]
                          if m.group(0) in made[:len(readme_ids)] else m.group(0), line)
        return TIME.sub("<time>", DAGSTER_RUN_ID.sub("<dagster run>", line.rstrip()))

    for command, shown in steps:
        line = ".venv/bin/rag-eval run" if command == "make run" else command
        line = RUN_ID.sub(real_run_id, line).replace(".venv/bin/rag-eval", rag_eval)
        # Both streams in one, in the order a terminal shows them (runs' progress on stderr, the story on stdout).
        result = run_to_end(["bash", "-c", f"{line} 2>&1"], cwd=checkout, env=env)
        assert result.returncode == 0, f"$ {command}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        # the sample's runs and the sweep's (data/sample/sweep.yaml stores under data/sweep/)
        made += sorted(p.name for runs in (checkout / "data" / "runs", checkout / "data" / "sweep" / "runs")
                       if runs.is_dir() for p in runs.iterdir() if RUN_ID.fullmatch(p.name) and p.name not in made)
        real = [normalised(x) for x in (result.stdout + result.stderr).splitlines()]
        expected = [TIME.sub("<time>", DAGSTER_RUN_ID.sub("<dagster run>", x)) for x in shown]
        missing = first_not_printed(expected, real)
        assert missing is None, f"$ {command}: README shows {missing!r}, not printed there:\n" + "\n".join(real)
