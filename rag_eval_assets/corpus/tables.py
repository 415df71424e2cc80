"""Documents as a table (one row per section), so chunking can re-run without re-parsing PDFs."""

from __future__ import annotations

from itertools import groupby
from operator import attrgetter

import pandas as pd

from rag_eval_assets.corpus.model import Document, Section

SECTION_COLUMNS = ("doc_id", "rel_path", "title", "kind", "section_index", "heading_path", "page", "char_start", "text")


def documents_to_frame(docs: list[Document]) -> pd.DataFrame:
    rows = [
        (d.doc_id, d.rel_path, d.title, d.kind, i, s.heading_path, s.page, s.char_start, s.text)
        for d in docs
        for i, s in enumerate(d.sections)
    ]
    df = pd.DataFrame(rows, columns=list(SECTION_COLUMNS))
    df["page"] = df["page"].astype("Int64")
    return df


def documents_from_frame(df: pd.DataFrame) -> list[Document]:
    # One pass over the sorted rows: a pandas group per document costs milliseconds each, minutes at 100,000.
    ordered = df.sort_values(["doc_id", "section_index"], kind="stable")
    docs = []
    for doc_id, rows in groupby(ordered.itertuples(index=False), key=attrgetter("doc_id")):
        rows = list(rows)
        first = rows[0]
        sections = tuple(
            Section(
                heading_path=str(r.heading_path),
                page=None if pd.isna(r.page) else int(r.page),
                text=str(r.text),
                char_start=int(r.char_start),
            )
            for r in rows
        )
        docs.append(Document(str(doc_id), str(first.rel_path), str(first.title), str(first.kind), sections))
    return docs
