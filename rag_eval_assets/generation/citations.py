"""The contexts an answerer is given and the citation records it returns.

A context is one retrieved chunk with the location fields a citation needs. Its label is how a reader finds it:
"стр. N" for a PDF page (seed 000's page citation), "rel_path > heading_path" for a note section (seed 002's
anchor), the bare rel_path for text before any heading or a file without headings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from rag_eval_assets.corpus.headings import DELIMITER


@dataclass(frozen=True)
class Context:
    chunk_id: str
    rel_path: str
    heading_path: str
    page: int | None  # 1-based PDF page
    text: str

    @property
    def label(self) -> str:
        return citation_label(self.rel_path, self.heading_path, self.page)

    def citation(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "rel_path": self.rel_path,
            "heading_path": self.heading_path,
            "page": self.page,
            "label": self.label,
        }


def citation_label(rel_path: str, heading_path: str, page: int | None) -> str:
    if page is not None:
        return f"стр. {page}"
    return f"{rel_path}{DELIMITER}{heading_path}" if heading_path else rel_path


def contexts_json(contexts: list[Context]) -> str:
    return json.dumps([asdict(c) for c in contexts], ensure_ascii=False)


def contexts_from_json(text: str) -> list[Context]:
    return [Context(**c) for c in json.loads(text)]


def citations_json(citations: list[dict[str, Any]]) -> str:
    return json.dumps(citations, ensure_ascii=False)


def contexts_by_query(retrieval_results: pd.DataFrame, chunks: pd.DataFrame, k: int) -> dict[str, list[Context]]:
    """Each query's top-k retrieved chunks in rank order, joined with the chunks table for text and location.

    A retrieved chunk id missing from `chunks` is an error: answering without its text would silently shrink the
    context.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    top = retrieval_results[retrieval_results["rank"] <= k].sort_values(["query_id", "rank"], kind="stable")
    wanted = chunks[chunks["chunk_id"].isin(set(top["chunk_id"]))]
    by_id = {
        chunk_id: Context(chunk_id, str(rel_path), str(heading_path), None if pd.isna(page) else int(page), str(text))
        for chunk_id, rel_path, heading_path, page, text in zip(
            wanted["chunk_id"], wanted["rel_path"], wanted["heading_path"], wanted["page"], wanted["text"]
        )
    }
    missing = sorted(set(top["chunk_id"]) - set(by_id))
    if missing:
        raise ValueError(f"retrieval results name chunk ids not in the chunks table: {missing[:5]}")
    out: dict[str, list[Context]] = {}
    for query_id, chunk_id in zip(top["query_id"], top["chunk_id"]):
        out.setdefault(query_id, []).append(by_id[chunk_id])
    return out
