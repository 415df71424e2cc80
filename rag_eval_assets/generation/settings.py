"""The generation part of rag_eval.yaml: `answering:` (who answers, from how many chunks), `judge:` and
`query_generation:` (seed 004)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, StrictBool, StrictFloat, StrictInt, StrictStr

from rag_eval_assets.llm.settings import LLMSettings
from rag_eval_assets.settings_base import KValues, Section, above, at_least, between, problem

# Seed 000's "(стр. N...)" and its English and Chinese forms: "стр. 12", "p. 12", "page 12", "第12页", parentheses
# optional. Answers are folded to lower case before matching; the lookbehind keeps "пестр. 5" or "top. 5" out.
DEFAULT_CITATION_PATTERN = r"(?<!\w)(?:стр\.|p\.|page)\s*\d+|第\s*\d+\s*页"


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise problem(f"not a regular expression: {exc}") from exc
    return pattern


class AnsweringSettings(Section):
    # extractive (offline, no LLM) | llm, for our retrievers; the http retriever's partitions always take the
    # service's own answer, abstention flag and references (seed 002).
    answerer: Literal["extractive", "llm"] = "extractive"
    k_values: KValues = (5, 10)  # the k dimension of the answer grid: top-k chunks given to the answerer
    # seed 000's "стр. N"; e.g. r"\bp\.\s*\d+" or r"第\d+页"
    citation_pattern: Annotated[StrictStr, AfterValidator(_regex)] = DEFAULT_CITATION_PATTERN
    adapter_id: StrictStr | None = None  # seed 003: the fine-tuned adapter (or registry model id) behind the answerer
    # the extractive answerer abstains when no retrieved sentence holds this idf-weighted share of the question's
    # terms (generation/extractive.py; docs/generation.md shows its effect on answered_rate)
    extractive_threshold: Annotated[StrictFloat, above(0), between(0, 1)] = 0.3
    llm: LLMSettings | None = None  # the answerer's own endpoint; None: the top-level llm


class JudgeSettings(Section):
    enabled: StrictBool = True  # judges run only when an llm endpoint is configured
    replicates: Annotated[StrictInt, at_least(0)] = 0  # > 0: judge a sample again this many times, report agreement
    replicate_sample: Annotated[StrictInt, at_least(0)] = 10
    # a judge whose quadratic kappa with the person's grades is below this is not trusted (judging/agreement.py) ...
    trust_kappa: Annotated[StrictFloat, between(-1, 1)] = 0.4
    # ... once it has at least this many graded answers; also the fewest grades a calibrated estimate is made from
    min_grades: Annotated[StrictInt, at_least(1)] = 10
    # the judges' own endpoint (a stronger model than the answerer's, say); None: the top-level llm. Its model,
    # temperature and the prompt version are comparison invariants; the answerer's model is not
    llm: LLMSettings | None = None


def spot_check(n: int) -> dict[str, Any]:
    """The settings override of seed 002's reliability spot-check: `n` judged answers judged once more."""
    return {"judge": {"replicates": 1, "replicate_sample": n}}


class QueryGenerationSettings(Section):
    # chunks sampled (seeded, spread across documents) for seed 004 query generation
    n_chunks: Annotated[StrictInt, at_least(1)] = 10
    seed: StrictInt = 0
    llm: LLMSettings | None = None  # query generation's own endpoint; None: the top-level llm
