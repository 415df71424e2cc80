"""The judged answers of a run, with the whole input each judge was sent, for `rag-eval label --grade`.

The run directory's results.jsonl lists each answer's judgments (judge, score, judge_input, replicate). Its texts
are cut to 200 characters unless the run was written with `report.store_full_text`; then the run directory alone
is enough. Otherwise the whole judge inputs are read from the `judged_answers` tables of the table store, and a
table row stands for the run's judgment only when its score is the run's and its input, cut as the run cut it, is
the run's: a judgment whose table a later run has replaced is not offered.
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
from rag_eval_assets.generation.judges import JUDGES
from rag_eval_assets.generation.prompts import JUDGE_PROMPTS
from rag_eval_assets.generation.judges import judge_input_sha256
from rag_eval_assets.labeling.grades import Grade, GradeKey, disagrees
from rag_eval_assets.runs.store import RESULTS_FILE, Run, config_value, read_run, truncate_texts

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
        raise InputError([InputProblem(results_file, None, "judgments", "no judgment with a score: this run's "
                                       "answers were not judged (it ran without llm, or with judge.enabled false)")])
    notes = []
    if config_value(run.config, FULL_TEXT_KEY):
        whole = {_judgment_key(row, j): json.dumps(j["judge_input"], ensure_ascii=False)
                 for row in rows for j in _main(row)}
        notes.append(f"judge inputs from {results_file} (the run kept its texts whole)")
    elif stored is None:
        raise InputError([InputProblem(results_file, None, "judgments.judge_input", "cut to 200 characters and no "
                                       "table store to read them whole from")])
    else:
        whole, missing = _stored_inputs(rows, stored)
        notes.append("judge inputs from the judged_answers tables of the table store (results.jsonl cuts them)")
        if missing:
            notes.append(f"{missing} judgment(s) of run {run.run_id} are no longer in the stored tables (a later run "
                         "replaced them): not offered")
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
        raise InputError([InputProblem(results_file, None, "judgments", "none of this run's judgments is in the "
                                       "stored judged_answers tables any more: a later run replaced them")])
    return run, answers, notes


def _main(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in row.get("judgments") or [] if j.get("replicate", 0) == 0 and j.get("score") is not None
            and j.get("judge") in JUDGES]


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
                if found is not None and found["score"] == j["score"] and isinstance(found["judge_input"], str) \
                        and truncate_texts(json.loads(found["judge_input"])) == truncate_texts(j["judge_input"]):
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
