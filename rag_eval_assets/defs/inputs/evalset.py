"""The frozen evalset and its deterministic dev subset."""


import dagster as dg
import pandas as pd

from rag_eval_assets.defs.fingerprints import EVALSET_FILE
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.defs.metadata import dataset_versions, preview, version_metadata
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.errors import InputError
from rag_eval_assets.evalset.frozen_store import freeze
from rag_eval_assets.evalset.subset import dev_subset as make_dev_subset
from rag_eval_assets.evalset.tables import questions_from_frame, questions_to_frame
from rag_eval_assets.preflight import check_evalset
from rag_eval_assets.configured_run import dataset_part
from rag_eval_assets.runs.versions import VersionTuple

FROZEN_CHECK = "frozen_version_unchanged"


def _counts(df: pd.DataFrame, column: str) -> dg.MetadataValue:
    return dg.MetadataValue.json({str(k): int(v) for k, v in df[column].fillna("(none)").value_counts().items()})


@dg.asset(
    group_name="inputs",
    kinds={"pandas", "parquet"},
    code_version="1",
    deps=[preflight, EVALSET_FILE],
    check_specs=[
        dg.AssetCheckSpec(
            FROZEN_CHECK,
            asset="evalset",
            blocking=True,
            description="The evalset file has not changed since it was first frozen under this version name.",
        )
    ],
)
def evalset(context: dg.AssetExecutionContext, settings: RagEvalSettings):
    """The evaluation questions, frozen: content sha256 -> eval_set_version (name@sha) and the data version."""
    s = settings.load()
    checked = check_evalset(s)
    sha, version = checked.sha256, checked.version
    check_metadata = {"name": s.evalset.name, "sha256": sha, "registered_sha256": checked.registered_sha256 or sha}
    if checked.problem is not None:
        # Failed before the table and the frozen copy are written: an edited evalset changes nothing stored.
        yield dg.AssetCheckResult(check_name=FROZEN_CHECK, passed=False, metadata=check_metadata,
                                  description=str(checked.problem))
        raise InputError([checked.problem])
    freeze(s.evalset.path, s.frozen_dir, s.evalset.name, sha)
    df = questions_to_frame(checked.questions)
    versions = VersionTuple(dataset=dataset_part(s, evalset_sha256=sha))
    yield dg.Output(
        df,
        data_version=dg.DataVersion(sha),
        metadata={
            "eval_set_version": version,
            "evalset_sha256": sha,
            "evalset_path": str(s.evalset.path),
            "format": ", ".join(sorted(df["format"].unique())),
            "questions": len(df),
            "by_type": _counts(df, "type"),
            "by_category": _counts(df, "category"),
            "preview": preview(df, ["id", "question", "type", "category", "answerable"]),
            **version_metadata(versions),
        },
    )
    yield dg.AssetCheckResult(check_name=FROZEN_CHECK, passed=True, metadata=check_metadata)


@dg.asset(group_name="inputs", kinds={"pandas", "parquet"}, code_version="1", deps=[preflight])
def dev_subset(
    context: dg.AssetExecutionContext, settings: RagEvalSettings, evalset: pd.DataFrame
) -> dg.Output[pd.DataFrame]:
    """A deterministic stratified subset for quick gates (seed 003's dev100), by type and category."""
    s = settings.load()
    picked = make_dev_subset(questions_from_frame(evalset), s.dev_subset.size, s.dev_subset.seed)
    ids = {q.id for q in picked}
    df = evalset[evalset["id"].isin(ids)].reset_index(drop=True)
    return dg.Output(
        df,
        metadata={
            "questions": len(df),
            "size": s.dev_subset.size,
            "seed": s.dev_subset.seed,
            "by_type": _counts(df, "type"),
            **version_metadata(dataset_versions(context, s, corpus=False)),
        },
    )
