"""Corpus documents, chunks and gold labels resolved against the chunks."""

import re
from collections.abc import Mapping
from typing import Any

import dagster as dg
import pandas as pd

from rag_eval_assets.configured_run import chunking_part, dataset_part
from rag_eval_assets.corpus.chunking import CHUNKER_VERSION
from rag_eval_assets.corpus.gold import resolve_gold_report, unresolved_count, unresolved_summary
from rag_eval_assets.corpus.load import corpus_sha256, load_corpus
from rag_eval_assets.corpus.model import CHUNK_COLUMNS
from rag_eval_assets.corpus.tables import documents_from_frame, documents_to_frame
from rag_eval_assets.defs.code_versions import with_settings_read
from rag_eval_assets.defs.fingerprints import CORPUS_FILES
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.defs.metadata import content_version, dataset_versions, preview, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.evalset.tables import questions_from_frame
from rag_eval_assets.preflight import chunk_corpus
from rag_eval_assets.runs.contents import UNRESOLVED_GOLD
from rag_eval_assets.runs.versions import VersionTuple, plain
from rag_eval_assets.settings import Settings

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


def chunk_set_key(asset: str, chunk_set: str | None) -> dg.AssetKey:
    """`chunks` (the top-level chunking's), `chunks/300-50` (another chunking's); likewise gold_labels."""
    return dg.AssetKey([asset, chunk_set] if chunk_set else [asset])


def chunk_set_ins(settings: Settings, *assets: str) -> dict[str, dg.AssetIn]:
    """The inputs of `assets` ("chunks", "gold_labels") of every chunking besides the top-level one (whose inputs
    keep their names), for an asset that reads the variants' own chunks."""
    return {_input_name(asset, chunk_set): dg.AssetIn(key=chunk_set_key(asset, chunk_set))
            for chunk_set in settings.chunk_sets for asset in assets}


def of_chunk_set(inputs: Mapping[str, Any], asset: str, chunk_set: str | None) -> pd.DataFrame:
    """The loaded input of `asset` ("chunks", "gold_labels") of a variant's chunk set (None: the top-level)."""
    return inputs[asset if chunk_set is None else _input_name(asset, chunk_set)]


def _input_name(asset: str, chunk_set: str) -> str:
    return re.sub(r"\W", "_", f"{asset}__{chunk_set}")


def _chunks_asset(chunk_set: str | None, code_version: str = CHUNKER_VERSION,
                  ) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition]:
    """The chunks of the top-level chunking (`chunks`, chunk_set None) or of another one a variant names, with
    their blocking schema check. The top-level one's code version hashes its chunking (defs/code_versions.py);
    another's key names its chunking."""

    @dg.asset(key=chunk_set_key("chunks", chunk_set), group_name="inputs", kinds={"pandas", "parquet"},
              code_version=code_version, deps=[preflight])
    def chunks(
        context: dg.AssetExecutionContext, settings: RagEvalSettings, corpus_documents: pd.DataFrame
    ) -> dg.Output[pd.DataFrame]:
        """Chunks that never cross a section or a page, with stable ids (seed 002)."""
        s = settings.load()
        chunking = s.chunk_sets[chunk_set] if chunk_set else s.chunking
        df = chunk_corpus(s, documents_from_frame(corpus_documents), chunking)
        versions = dataset_versions(context, s, evalset=False).with_part("index", **chunking_part(s, chunking))
        return dg.Output(
            df,
            metadata={
                "chunks": len(df),
                "chunker_version": CHUNKER_VERSION,
                "chunk_size_chars": chunking.chunk_size_chars,
                "overlap_chars": chunking.overlap_chars,
                "mean_chars": float(df["text"].str.len().mean()) if len(df) else 0.0,
                "preview": preview(df, ["chunk_id", "rel_path", "heading_path", "page", "text"]),
                **version_metadata(versions),
            },
        )

    @dg.asset_check(asset=chunks, name="chunks_schema", blocking=True,
                    description="Columns as documented, ids unique, no empty chunk.")
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

    return chunks, chunks_schema


def _gold_labels_asset(chunk_set: str | None, code_version: str = "1") -> dg.AssetsDefinition:
    """The gold labels resolved against the chunks of the top-level chunking (`gold_labels`) or of another one."""
    key = chunk_set_key("gold_labels", chunk_set)

    @dg.asset(
        key=key,
        group_name="inputs",
        kinds={"pandas", "parquet"},
        code_version=code_version,
        deps=[preflight],
        ins={"evalset": dg.AssetIn(), "corpus_documents": dg.AssetIn(),
             "chunks": dg.AssetIn(key=chunk_set_key("chunks", chunk_set))},
        check_specs=[
            dg.AssetCheckSpec(
                GOLD_CHECK,
                asset=key,
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
        chunking = s.chunk_sets[chunk_set] if chunk_set else s.chunking
        versions = dataset_versions(context, s).with_part("index", **chunking_part(s, chunking))
        yield dg.Output(
            gold,
            # By content: a re-run that resolves the same labels (strict_gold changed, say) leaves the grid up to
            # date.
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

    return gold_labels


chunks, chunks_schema = _chunks_asset(None)
gold_labels = _gold_labels_asset(None)


def chunk_set_assets(settings: Settings) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """The chunks and gold labels of every chunking a variant names besides the top-level one, each built once
    however many variants search it; their code version hashes the chunking and what gold reads."""
    assets, checks = [], []
    for chunk_set, chunking in settings.chunk_sets.items():
        made, check = _chunks_asset(chunk_set, with_settings_read(
            CHUNKER_VERSION, {"corpus_id": settings.corpus.id, "chunking": plain(chunking)}))
        assets += [made, _gold_labels_asset(chunk_set, with_settings_read(
            "1", {"strict_gold": settings.evalset.strict_gold}))]
        checks.append(check)
    return assets, checks


def latest_unresolved_gold(context: dg.AssetExecutionContext) -> dict | None:
    """The unresolved labels gold_labels' latest materialization listed (see GoldResolution.unresolved_document)."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey("gold_labels"))
    entry = event.asset_materialization.metadata.get(UNRESOLVED_GOLD) if event and event.asset_materialization else None
    return None if entry is None else entry.value

