"""Seed 002 eval_set.jsonl: anchor gold (gold_supports), abstention (answerable), multi-hop support groups."""

from __future__ import annotations

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.fields import Fields
from rag_eval_assets.evalset.formats.anchors import read_gold_supports
from rag_eval_assets.evalset.records import Record, json_type
from rag_eval_assets.evalset.registry import EvalsetFormat
from rag_eval_assets.evalset.schema import Question

RECENCY_CONFLICT_RULES = ("cite_newer", "acknowledge_both", "cite_both")


def parse(file: str, record: Record, problems: list[InputProblem]) -> Question | None:
    f = Fields(file, record.line, record.value, problems)
    qid = f.text("id", required=True, nonblank=True)
    question = f.text("question", required=True, nonblank=True)
    answerable = f.boolean("answerable", True)
    gold_supports = read_gold_supports(f)
    raw_supports = record.value.get("gold_supports")
    support_count = len(raw_supports) if isinstance(raw_supports, list) else 0
    groups = _support_groups(f, support_count)
    recency_conflict_rule = f.choice("recency_conflict_rule", RECENCY_CONFLICT_RULES)
    expected_key_facts = f.texts("expected_key_facts")
    tags, vaults, folders = f.texts("tags"), f.texts("vaults"), f.texts("folders")
    category, difficulty = f.text("category"), f.text("difficulty")
    if not answerable and gold_supports:
        f.problem("gold_supports", "an unanswerable question (answerable=false) must have no gold supports")
    return FORMAT.question(
        file,
        record,
        qid,
        question,
        answerable=answerable,
        expected_key_facts=expected_key_facts,
        gold_supports=gold_supports,
        required_support_groups=groups,
        recency_conflict_rule=recency_conflict_rule,
        tags=tags,
        vaults=vaults,
        folders=folders,
        category=category,
        difficulty=difficulty,
    )


# gold_supports marks seed 002 unless the file shows seed 004's own markers (seed 004 may carry it too); a plain
# list of questions is a seed 002 evalset with no gold yet: what `rag-eval label` starts from.
FORMAT = EvalsetFormat(
    "seed002",
    "jsonl",
    parse=parse,
    marker_keys=frozenset(
        {"answerable", "expected_key_facts", "required_support_groups", "recency_conflict_rule", "gold_supports"}
    ),
    fallback_keys=frozenset({"id", "question"}),
)


def _support_groups(f: Fields, support_count: int) -> tuple[tuple[int, ...], ...] | None:
    """null, or OR-of-groups where each group ANDs indices into gold_supports."""
    name = "required_support_groups"
    if not f.given(name):
        return None
    value = f.obj[name]
    if not isinstance(value, list) or not value:
        f.problem(name, f"expected null or a non-empty array of index arrays, got {json_type(value)} {value!r}")
        return None
    groups: list[tuple[int, ...]] = []
    for g, group in enumerate(value):
        if not isinstance(group, list) or not group:
            f.problem(f"{name}[{g}]", f"expected a non-empty array of indices, got {json_type(group)} {group!r}")
            continue
        for i, index in enumerate(group):
            if isinstance(index, bool) or not isinstance(index, int):
                f.problem(f"{name}[{g}][{i}]", f"expected an integer index, got {json_type(index)} {index!r}")
            elif not 0 <= index < support_count:
                f.problem(
                    f"{name}[{g}][{i}]",
                    f"index {index} is out of range: gold_supports has {support_count} item(s)",
                )
        groups.append(tuple(group))
    return tuple(groups)
