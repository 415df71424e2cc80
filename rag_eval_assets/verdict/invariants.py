"""What two runs must share to be compared (the same evalset and corpus, and the same judge when both judged), and
what one run holds that the other does not."""

from __future__ import annotations

from collections.abc import Sequence

from rag_eval_assets.runs.store import Run, config_value

# (name, dotted key in config.json): runs that differ in one of these measure different things.
DATASET_INVARIANTS = (
    ("evalset_sha256", "version_tuple.dataset.evalset_sha256"),
    ("corpus_sha256", "version_tuple.dataset.corpus_sha256"),
)
JUDGE_INVARIANTS = (
    ("judge_model", "version_tuple.judge.model"),
    ("judge_prompt_version", "version_tuple.judge.prompt_version"),
    ("judge_temperature", "version_tuple.judge.temperature"),
)

def retrievers_of_one_run(base: Run, cand: Run, chosen: Sequence[str] | None) -> list[str]:
    """A retriever that only one run holds has no cell to judge: said, so that a renamed or dropped variant (a sweep
    value changed) is never passed over in silence."""
    held = [{row["retriever"] for row in run.results} for run in (base, cand)]  # not a second per-query frame
    out = []
    for side, mine, other in (("base", held[0], held[1]), ("candidate", held[1], held[0])):
        alone = sorted(r for r in mine - other if chosen is None or r in chosen)
        if alone:
            out.append(f"only in the {side} run, not compared: {', '.join(alone)}")
    return out


def invariants(base: Run, cand: Run) -> tuple[list[str], list[str]]:
    """Invariant mismatch messages, and warnings. Judge invariants apply only when both runs used a judge: a run
    without one has no judge metrics, so nothing judge-made is compared."""
    mismatches, warnings = [], []
    checks = list(DATASET_INVARIANTS)
    base_judge, cand_judge = (config_value(r.config, JUDGE_INVARIANTS[0][1]) for r in (base, cand))
    if base_judge is not None and cand_judge is not None:
        checks += JUDGE_INVARIANTS
    elif (base_judge is None) != (cand_judge is None):
        only = "base" if base_judge is not None else "candidate"
        warnings.append(f"only the {only} run used a judge: judge invariants not checked, judge metrics not compared")
    for name, key in checks:
        b, c = config_value(base.config, key), config_value(cand.config, key)
        if b != c:
            mismatches.append(f"invariant {name} ({key}) differs: base={b!r}, candidate={c!r}")
        elif b is None:
            warnings.append(f"invariant {name} ({key}) is recorded in neither run")
    return mismatches, warnings
