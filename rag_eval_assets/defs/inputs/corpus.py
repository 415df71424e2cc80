"""Corpus documents, chunks and gold labels resolved against the chunks."""


import dagster as dg
import pandas as pd

from rag_eval_assets.configured_run import chunking_part, dataset_part
from rag_eval_assets.corpus.chunking import CHUNKER_VERSION
from rag_eval_assets.corpus.gold import resolve_gold_report, unresolved_count, unresolved_summary
from rag_eval_assets.corpus.load import corpus_sha256, load_corpus
from rag_eval_assets.corpus.model import CHUNK_COLUMNS
from rag_eval_assets.corpus.tables import documents_from_frame, documents_to_frame
from rag_eval_assets.defs.fingerprints import CORPUS_FILES
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.defs.metadata import content_version, dataset_versions, preview, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.evalset.tables import questions_from_frame
from rag_eval_assets.preflight import chunk_corpus
from rag_eval_assets.runs.contents import UNRESOLVED_GOLD
from rag_eval_assets.runs.versions import VersionTuple

GOLD_CHECK = "gold_resolves"


@dg.asset(group_name="inputs", kinds={"pandas", "parquet"}, code_version="1", deps=[preflight, CORPUS_FILES])
def corpus_documents(settings: RagEvalSettings) -> dg.Output[pd.DataFrame]:
    """Every document of the corpus, one row per section (Markdown section, PDF page, text file)."""
    s = settings.load()
    docs = load_corpus(s.corpus.path)
    sha = corpus_sha256(s.corpus.path)
    df = documents_to_frame(docs)
    versions = VersionTuple(dataset=dataset_part(s, corpus_sha256=sha))
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


@dg.asset(group_name="inputs", kinds={"pandas", "parquet"}, code_version=CHUNKER_VERSION, deps=[preflight])
def chunks(
    context: dg.AssetExecutionContext, settings: RagEvalSettings, corpus_documents: pd.DataFrame
) -> dg.Output[pd.DataFrame]:
    """Chunks that never cross a section or a page, with stable ids (seed 002)."""
    s = settings.load()
    df = chunk_corpus(s, documents_from_frame(corpus_documents))
    versions = dataset_versions(context, s, evalset=False).with_part("index", **chunking_part(s))
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


@dg.asset(
    group_name="inputs",
    kinds={"pandas", "parquet"},
    code_version="1",
    deps=[preflight],
    check_specs=[
        dg.AssetCheckSpec(
            GOLD_CHECK,
            asset="gold_labels",
            blocking=True,
            description="Every gold label resolves to a chunk of the corpus. A failure is a warning, and the run "
            "scores what resolved; with evalset.strict_gold it is an error that stops the run here.",
        )
    ],
)
def gold_labels(
    context: dg.AssetExecutionContext,
    settings: RagEvalSettings,
    evalset: pd.DataFrame,
    corpus_documents: pd.DataFrame,
    chunks: pd.DataFrame,
):
    """Gold labels resolved to current chunk ids at run time, so anchored labels survive re-chunking; labels that
    resolve to nothing are listed (unresolved_gold) and fail the gold_resolves check."""
    s = settings.load()
    strict = s.evalset.strict_gold
    doc_ids = corpus_documents["doc_id"].unique().tolist()  # judged documents with no text have no chunks
    resolution = resolve_gold_report(questions_from_frame(evalset), chunks, doc_ids, strict=False)
    gold, unresolved = resolution.gold, resolution.unresolved_document()
    versions = dataset_versions(context, s).with_part("index", **chunking_part(s))
    yield dg.Output(
        gold,
        # By content: a re-run that resolves the same labels (strict_gold changed, say) leaves the grid up to date.
        data_version=content_version(gold),
        metadata={
            "gold_rows": len(gold),
            "questions_with_gold": int(gold["query_id"].nunique()) if len(gold) else 0,
            "report": dg.MetadataValue.json(resolution.counts),
            UNRESOLVED_GOLD: dg.MetadataValue.json(unresolved),
            **version_metadata(versions),
        },
    )
    passed = not resolution.unresolved
    yield dg.AssetCheckResult(
        check_name=GOLD_CHECK,
        passed=passed,
        severity=dg.AssetCheckSeverity.ERROR if strict else dg.AssetCheckSeverity.WARN,
        # The whole list is the unresolved_gold metadata; a check's description stays short.
        description=None if passed else (
            (unresolved_count(unresolved) + " evalset.strict_gold stops the run here." if strict
             else unresolved_summary(unresolved))
            + " First: " + "; ".join(f"{u.query_id} {u.support}: {u.why}" for u in resolution.unresolved[:3])
        )[:2000],
        metadata={"unresolved": len(resolution.unresolved), "unscored_questions": len(resolution.unscored),
                  "strict_gold": strict},
    )


def latest_unresolved_gold(context: dg.AssetExecutionContext) -> dict | None:
    """The unresolved labels gold_labels' latest materialization listed (see GoldResolution.unresolved_document)."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey("gold_labels"))
    entry = event.asset_materialization.metadata.get(UNRESOLVED_GOLD) if event and event.asset_materialization else None
    return None if entry is None else entry.value

