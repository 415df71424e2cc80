"""Corpus documents, chunks and gold labels resolved against the chunks."""


import dagster as dg
import pandas as pd

from rag_eval_assets.corpus.chunking import CHUNKER_VERSION
from rag_eval_assets.corpus.gold import resolve_gold_report
from rag_eval_assets.corpus.load import corpus_sha256, load_corpus
from rag_eval_assets.corpus.model import CHUNK_COLUMNS
from rag_eval_assets.corpus.tables import documents_from_frame, documents_to_frame
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.defs.metadata import preview, upstream_versions, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.evalset.tables import questions_from_frame
from rag_eval_assets.preflight import chunk_corpus
from rag_eval_assets.runs.versions import VersionTuple


@dg.asset(group_name="inputs", kinds={"pandas", "parquet"}, deps=[preflight])
def corpus_documents(settings: RagEvalSettings) -> dg.Output[pd.DataFrame]:
    """Every document of the corpus, one row per section (Markdown section, PDF page, text file)."""
    s = settings.load()
    docs = load_corpus(s.corpus.path)
    sha = corpus_sha256(s.corpus.path)
    df = documents_to_frame(docs)
    versions = VersionTuple().with_part("dataset", corpus_sha256=sha, corpus_id=s.corpus.id)
    return dg.Output(
        df,
        data_version=dg.DataVersion(sha),
        metadata={
            "corpus_sha256": sha,
            "corpus_path": str(s.corpus.path),
            "documents": len(docs),
            "by_kind": dg.MetadataValue.json(df.drop_duplicates("doc_id")["kind"].value_counts().to_dict()),
            **version_metadata(versions),
        },
    )


@dg.asset(group_name="inputs", kinds={"pandas", "parquet"})
def chunks(
    context: dg.AssetExecutionContext, settings: RagEvalSettings, corpus_documents: pd.DataFrame
) -> dg.Output[pd.DataFrame]:
    """Chunks that never cross a section or a page, with stable ids (seed 002)."""
    s = settings.load()
    df = chunk_corpus(s, documents_from_frame(corpus_documents))
    versions = upstream_versions(context, "corpus_documents").with_part(
        "index",
        chunker_version=CHUNKER_VERSION,
        chunk_size_chars=s.chunking.chunk_size_chars,
        overlap_chars=s.chunking.overlap_chars,
    )
    return dg.Output(
        df,
        metadata={
            "chunks": len(df),
            "chunker_version": CHUNKER_VERSION,
            "chunk_size_chars": s.chunking.chunk_size_chars,
            "overlap_chars": s.chunking.overlap_chars,
            "mean_chars": float(df["text"].str.len().mean()) if len(df) else 0.0,
            "preview": preview(df, ["chunk_id", "rel_path", "heading_path", "page", "text"]),
            **version_metadata(versions),
        },
    )


@dg.asset_check(asset=chunks, blocking=True, description="Columns as documented, ids unique, no empty chunk.")
def chunks_schema(chunks: pd.DataFrame) -> dg.AssetCheckResult:
    problems = []
    if tuple(chunks.columns) != CHUNK_COLUMNS:
        problems.append(f"columns {list(chunks.columns)} != {list(CHUNK_COLUMNS)}")
    else:
        duplicated = chunks.loc[chunks["chunk_id"].duplicated(), "chunk_id"].tolist()
        if duplicated:
            problems.append(f"duplicate chunk ids: {duplicated[:10]}")
        if (chunks["text"].str.strip() == "").any():
            problems.append("empty chunk text")
    return dg.AssetCheckResult(passed=not problems, description="; ".join(problems) or None)


@dg.asset(group_name="inputs", kinds={"pandas", "parquet"})
def gold_labels(
    context: dg.AssetExecutionContext,
    evalset: pd.DataFrame,
    corpus_documents: pd.DataFrame,
    chunks: pd.DataFrame,
) -> dg.Output[pd.DataFrame]:
    """Gold labels resolved to current chunk ids at run time, so anchored labels survive re-chunking."""
    doc_ids = corpus_documents["doc_id"].unique().tolist()  # judged documents with no text have no chunks
    gold, report = resolve_gold_report(questions_from_frame(evalset), chunks, doc_ids)
    versions = upstream_versions(context, "evalset", "chunks")
    return dg.Output(
        gold,
        metadata={
            "gold_rows": len(gold),
            "questions_with_gold": int(gold["query_id"].nunique()) if len(gold) else 0,
            "report": dg.MetadataValue.json(report),
            **version_metadata(versions),
        },
    )
