"""The evidence of a comparison's cells as text and Markdown, from comparison.json's `evidence` records
(verdict/compare.py evidence_record): per cell the questions that moved it most, and per question both runs'
retrieved lists side by side with the gold items marked, and both answers where the metric is an answer metric.
The HTML of the same records is reports/verdict_html.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_eval_assets.reports.markdown import markdown_table, text_table
from rag_eval_assets.verdict.text import signed

GOLD_MARK = "★"
QUESTION_HEADERS = ["query_id", "base", "cand", "diff", "flip", "gold rank base → cand", "question"]
SIDE_HEADERS = ["rank", "base: document / chunk", "base score", "cand: document / chunk", "cand score"]


def evidence_title(e: Mapping[str, Any]) -> str:
    """"bm25@10 ndcg@k (worse): 60 questions down (0 success → failure), 0 up; the 10 that moved it most, drops
    first"."""
    head = (f"{e['retriever']}@{e['k']} {e['metric']} ({e['result']}): {e['drops']} questions down "
            f"({e['flips_down']} success → failure), {e['gains']} up ({e['flips_up']} failure → success)")
    if not e["questions"]:
        return f"{head}; no question moved"
    return f"{head}; the {len(e['questions'])} that moved it most, {e['order']}"


def gold_text(q: Mapping[str, Any], k: int) -> str:
    """Each gold item's rank in the base and the candidate run: "d03r 1 → 4", "d03r 1 → not in the top 5"."""
    if not q["gold_recorded"]:
        return "not recorded in these runs"
    if not q["gold"]:
        return "no gold"
    return "; ".join(f"{g['item']} {_rank(g['base_rank'], k)} → {_rank(g['cand_rank'], k)}" for g in q["gold"])


def _rank(rank: int | None, k: int) -> str:
    return f"not in the top {k}" if rank is None else str(rank)


def question_rows(e: Mapping[str, Any]) -> list[list[str]]:
    """Rows of QUESTION_HEADERS, one per question of the evidence, in its order."""
    rows = []
    for q in e["questions"]:
        ch = q["change"]
        flip = ("success → failure" if ch["diff"] < 0 else "failure → success") if ch["flip"] else ""
        rows.append([ch["query_id"], f"{ch['base']:.4f}", f"{ch['cand']:.4f}", signed(ch["diff"]), flip,
                     gold_text(q, e["k"]), (ch["question"] or "").replace("\n", " ")])
    return rows


def side_by_side_rows(q: Mapping[str, Any]) -> list[list[str]]:
    """Rows of SIDE_HEADERS: rank by rank, what each run retrieved, gold items marked with GOLD_MARK."""
    base, cand = q["base_retrieved"], q["cand_retrieved"]
    return [[str(i + 1), *_item(base, i), *_item(cand, i)] for i in range(max(len(base), len(cand)))]


def _item(items: Sequence[Mapping[str, Any]], i: int) -> list[str]:
    if i >= len(items):
        return ["", ""]
    item = items[i]
    name = " / ".join(str(v) for v in (item["doc_id"], item["chunk_id"]) if v is not None)
    score = "—" if item["score"] is None else f"{item['score']:.4f}"
    return [f"{GOLD_MARK} {name}" if item["gold"] else name, score]


def answer_lines(q: Mapping[str, Any]) -> list[str]:
    """Both answers with their judge scores and the person's grades; [] where the metric is no answer metric or the
    rows hold no answer."""
    lines = []
    for role, side in (("base", q["base_answer"]), ("cand", q["cand_answer"])):
        if side is None or (side["text"] is None and not side["judge_scores"]):
            continue
        scores = ", ".join(f"{j} {s:g}" + (f" (graded {side['grades'][j]:g})" if j in side["grades"] else "")
                           for j, s in side["judge_scores"].items()) or "not judged"
        lines.append(f"{role} answer [{scores}]: {(side['text'] or '').replace(chr(10), ' ')}")
    return lines


def evidence_text(e: Mapping[str, Any], *, full: bool = False) -> list[str]:
    """Terminal lines: the title and the question table; with `full`, each question's side-by-side lists too."""
    lines = [evidence_title(e), *(text_table(QUESTION_HEADERS, question_rows(e)) if e["questions"] else [])]
    if full:
        for q in e["questions"]:
            lines += ["", f"  {q['change']['query_id']}: {q['change']['question'] or ''}",
                      f"  gold rank base → cand: {gold_text(q, e['k'])}"]
            lines += text_table(SIDE_HEADERS, side_by_side_rows(q))
            lines += [f"  {line}" for line in answer_lines(q)]
    return lines


def evidence_markdown(e: Mapping[str, Any], heading: str = "####", *, full: bool = False) -> str:
    """The same as Markdown under `heading`."""
    parts = [f"{heading} {evidence_title(e)}", *([markdown_table(QUESTION_HEADERS, question_rows(e))]
                                                  if e["questions"] else [])]
    if full:
        for q in e["questions"]:
            parts.append(f"**{q['change']['query_id']}**: {q['change']['question'] or ''} (gold rank base → cand: "
                         f"{gold_text(q, e['k'])})")
            parts.append(markdown_table(SIDE_HEADERS, side_by_side_rows(q)))
            parts += [f"- {line}" for line in answer_lines(q)]
    return "\n\n".join(parts)
