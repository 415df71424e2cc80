"""The judged answers of a run, with the whole input each judge was sent, for `rag-eval label --grade`.

The run directory's results.jsonl lists each answer's judgments (judge, score, judge_input, replicate) and the
sha256 of each whole judge input. The whole inputs are read from the run's own judge_inputs.jsonl
(runs/judge_inputs.py), which every run keeps, failed ones included; a run written before that kept them whole in
results.jsonl only with `report.store_full_text`, and otherwise only the `judged_answers` tables of the table store
may still hold them: a table's input stands for the run's only when its sha256 is the run's, so another run's
answers (a later run's that replaced the tables, or the last committed run's when this one failed) are never shown
under this run's id.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval_assets.errors import InputError, InputProblem
from rag_eval_assets.generation.judges import JUDGES, judge_input_sha256
from rag_eval_assets.generation.prompts import JUDGE_PROMPTS
from rag_eval_assets.judging.grades import Grade, GradeKey, disagrees
from rag_eval_assets.runs.judge_inputs import JUDGE_INPUTS_FILE, read_judge_inputs
from rag_eval_assets.runs.status import why_not_good
from rag_eval_assets.runs.store import RESULTS_FILE, Run, config_value, read_run

JUDGED_ENTRY = "judged_answers/retriever={retriever}/k={k}"  # the table store's entry of one cell's judgments
FULL_TEXT_KEY = "settings.report.store_full_text"
# entry -> where that table's current version is (anything with .open("rb")), None when the store has none.
StoredTable = Callable[[str], Any]


@dataclass(frozen=True)
class Judgment:
    judge: str
    score: float
    judge_input: str  # the chat messages sent to the judge, as JSON text, whole
    judge_prompt_version: str
    judge_model: str | None

    @cached_property
    def sha256(self) -> str:
        return judge_input_sha256(self.judge_input)

    def fields(self) -> dict[str, str] | None:
        """The values the judge prompt was filled with (question, contexts, answer, reference), read back from the
        user message through the prompt's template; None when it does not fit the template."""
        prompts = JUDGE_PROMPTS.get(self.judge_prompt_version, {})
        if self.judge not in prompts:
            return None
        messages = json.loads(self.judge_input)
        return _template_values(prompts[self.judge][0].user_template, messages[-1]["content"])

    def user_message(self) -> str:
        return json.loads(self.judge_input)[-1]["content"]


@dataclass(frozen=True)
class JudgedAnswer:
    query_id: str
    retriever: str
    k: int
    question: str
    judgments: Mapping[str, Judgment]  # judge -> its main judgement (replicate 0), only those with a score

    @property
    def cell(self) -> tuple[str, int]:
        return self.retriever, self.k


def resolve_run(given: str, runs_dir: Path) -> Path:
    """A run directory, or the run of that id in `runs_dir`."""
    path = Path(given)
    if path.is_dir():
        return path
    if (runs_dir / given).is_dir():
        return runs_dir / given
    raise InputError([InputProblem(given, None, None, f"no such run: neither a directory nor a run id in {runs_dir}")])


def read_judged_answers(run_dir: Path, stored: StoredTable | None) -> tuple[Run, list[JudgedAnswer], list[str]]:
    """The run, its answers with at least one scored main judgement (in results.jsonl's order), and what was said
    on the way: where the whole judge inputs came from, and the judgments left out because the stored tables no
    longer hold them."""
    run = read_run(run_dir)
    rows = [row for row in run.results if _main(row)]
    results_file = str(run_dir / RESULTS_FILE)
    if not rows:
        raise InputError([InputProblem(results_file, None, "judgments", "no judgment with a score: "
                                       + _why_unjudged(run.results))])
    notes = []
    kept = read_judge_inputs(run_dir)
    if kept is not None:
        whole = {_judgment_key(row, j): kept[key] for row in rows for j in _main(row)
                 if (key := (*_judgment_key(row, j), 0)) in kept}
        notes.append(f"judge inputs from {run_dir / JUDGE_INPUTS_FILE} (kept with the run)")
    elif config_value(run.config, FULL_TEXT_KEY):
        whole = {_judgment_key(row, j): json.dumps(j["judge_input"], ensure_ascii=False)
                 for row in rows for j in _main(row)}
        notes.append(f"judge inputs from {results_file} (the run kept its texts whole)")
    elif stored is None:
        raise InputError([InputProblem(results_file, None, "judgments.judge_input", "cut to 200 characters and no "
                                       "table store to read them whole from")])
    else:
        whole, missing = _stored_inputs(rows, stored)
        notes.append(f"judge inputs from the judged_answers tables of the table store (run {run.run_id} predates "
                     f"{JUDGE_INPUTS_FILE} and results.jsonl cuts them)")
        if missing:
            notes.append(f"{missing} judgment(s) of run {run.run_id} not offered: the stored tables hold other judge "
                         f"inputs for them ({_whose(run_dir)})")
    answers = []
    for row in rows:
        judgments = {j["judge"]: Judgment(j["judge"], float(j["score"]), whole[_judgment_key(row, j)],
                                          j["judge_prompt_version"], j.get("judge_model"))
                     for j in _main(row) if _judgment_key(row, j) in whole}
        if judgments:
            ordered = {judge: judgments[judge] for judge in JUDGES if judge in judgments}
            answers.append(JudgedAnswer(row["query_id"], row["retriever"], int(row["k"]), row.get("question") or "",
                                        ordered))
    if not answers:
        raise InputError([InputProblem(results_file, None, "judgments", f"run {run.run_id} cannot be shown: it "
                                       f"predates {JUDGE_INPUTS_FILE}, results.jsonl cuts its judge inputs, and the "
                                       f"stored judged_answers tables hold none of them ({_whose(run_dir)})")])
    return run, answers, notes


def _whose(run_dir: Path) -> str:
    """Why the stored tables are not this run's: it failed (its tables were never committed) or it is not the
    newest (a later run replaced them)."""
    failed = why_not_good(run_dir)
    return f"this run failed, so its tables were never committed: {failed}" if failed else \
        "a later run replaced them"


def _main(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in row.get("judgments") or [] if j.get("replicate", 0) == 0 and j.get("score") is not None
            and j.get("judge") in JUDGES]


def _why_unjudged(results: list[dict[str, Any]]) -> str:
    """Why no answer of the run has a scored judgement: its judge calls failed (the first error said), or it judged
    nothing."""
    failed = [j for row in results for j in row.get("judgments") or [] if j.get("error") and j.get("judge") in JUDGES]
    if failed:
        return (f"every judge call of this run failed ({len(failed)} judgement(s) with an error; the first: "
                f"{failed[0]['error']})")
    return "this run's answers were not judged (it ran without llm, or with judge.enabled false)"


def _judgment_key(row: dict[str, Any], judgment: dict[str, Any]) -> tuple[str, str, int, str]:
    return row["query_id"], row["retriever"], int(row["k"]), judgment["judge"]


def _stored_inputs(rows: list[dict[str, Any]], stored: StoredTable) -> tuple[dict[tuple, str], int]:
    whole: dict[tuple, str] = {}
    missing = 0
    for retriever, k in sorted({(row["retriever"], int(row["k"])) for row in rows}):
        location = stored(JUDGED_ENTRY.format(retriever=retriever, k=k))
        table = pd.DataFrame(columns=["query_id", "judge", "replicate", "score", "judge_input"])
        if location is not None:
            with location.open("rb") as f:
                table = pd.read_parquet(f)
        main = table[table["replicate"] == 0].set_index(["query_id", "judge"])
        for row in rows:
            if (row["retriever"], int(row["k"])) != (retriever, k):
                continue
            for j in _main(row):
                found = main.loc[(row["query_id"], j["judge"])] if (row["query_id"], j["judge"]) in main.index else None
                # The digest, not the cut text: inputs that differ only past 200 characters (the answer, after
                # the question and contexts) are another run's.
                if found is not None and isinstance(found["judge_input"], str) \
                        and judge_input_sha256(found["judge_input"]) == j.get("judge_input_sha256"):
                    whole[_judgment_key(row, j)] = found["judge_input"]
                else:
                    missing += 1
    return whole, missing


def stratified_sample(answers: Sequence[JudgedAnswer], n: int, seed: int) -> list[JudgedAnswer]:
    """`n` answers spread as evenly as the cells allow over (retriever, k): each cell's answers shuffled with
    `seed`, then taken one per cell in turn (cells in sorted order) until `n` are taken or none is left. The same
    answers and seed give the same sample in the same order."""
    rng = random.Random(seed)
    cells: dict[tuple[str, int], list[JudgedAnswer]] = {}
    for answer in sorted(answers, key=lambda a: (a.retriever, a.k, a.query_id)):
        cells.setdefault(answer.cell, []).append(answer)
    queues = [cells[cell] for cell in sorted(cells)]
    for queue in queues:
        rng.shuffle(queue)
    picked: list[JudgedAnswer] = []
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop(0))
    return picked


def disagreements(answers: Sequence[JudgedAnswer],
                  grades: Mapping[GradeKey, Grade]) -> list[tuple[JudgedAnswer, tuple[str, ...]]]:
    """Each answer with the judges whose score a person's grade of the same judge input differs from by more than
    DISAGREEMENT_POINTS."""
    found = []
    for answer in answers:
        judges = tuple(j.judge for j in answer.judgments.values()
                       if (g := grades.get(GradeKey(answer.query_id, j.judge, j.sha256))) is not None
                       and disagrees(g.grade, j.score))
        if judges:
            found.append((answer, judges))
    return found


def _template_values(template: str, text: str) -> dict[str, str] | None:
    """str.format run backwards: the values of `template`'s fields in `text`, None when `text` does not fit it.
    Each field matches as little as it can, so a value containing the template's next literal (an answer that
    quotes "\\n\\nAnswer:\\n") is cut there; the whole text stays available as the judge's user message."""
    pattern, names = "", []
    for literal, name, _, _ in string.Formatter().parse(template):
        pattern += re.escape(literal)
        if name is not None:
            pattern += f"(?P={name})" if name in names else f"(?P<{name}>.*?)"
            names.append(name)
    match = re.fullmatch(pattern, text, re.DOTALL)
    return match.groupdict() if match else None
