"""Fingerprints of what Dagster cannot see change: the evalset file, the corpus files, each retriever's settings and
the person's grades of the judged answers.

Each is a cheap asset whose data version is a sha256 (of the file bytes, or of the retriever's parameters), so the
assets that depend on it become stale, in the CLI and in the UI alike, exactly when that sha256 changes. The
pipeline computes the same values before a run (`fingerprint`) and materializes only the ones that differ from what
the instance recorded.
"""

import hashlib
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from rag_eval_assets.corpus.load import corpus_sha256
from rag_eval_assets.defs.partitions import retriever_partitions
from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.evalset.freeze import evalset_sha256
from rag_eval_assets.judging.grades import grades_path
from rag_eval_assets.runs.versions import fingerprint as settings_fingerprint
from rag_eval_assets.configured_run import retriever_params
from rag_eval_assets.settings import Settings

EVALSET_FILE = "evalset_file"
CORPUS_FILES = "corpus_files"
RETRIEVER_CONFIG = "retriever_config"
GRADES_FILE = "grades_file"
NO_GRADES_FILE = "absent"  # grades_file's data version before anyone has graded
# fingerprint asset -> its data version now, from the settings (and, for retriever_config, the partition: a retriever).
_FINGERPRINT_OF: dict[str, Callable[[Settings, str | None], str]] = {
    EVALSET_FILE: lambda s, _: evalset_sha256(s.evalset.path),
    CORPUS_FILES: lambda s, _: corpus_sha256(s.corpus.path),
    RETRIEVER_CONFIG: lambda s, retriever: settings_fingerprint(retriever_params(s, str(retriever))),
    GRADES_FILE: lambda s, _: _grades_sha256(grades_path(s.evalset.path)),
}
FINGERPRINTS = tuple(_FINGERPRINT_OF)


def _grades_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else NO_GRADES_FILE


def fingerprint(s: Settings, key: str, partition: str | None = None) -> str:
    """The data version fingerprint asset `key` (partition: a retriever) has for these settings and files now."""
    return _FINGERPRINT_OF[key](s, partition)


@dg.asset(group_name="inputs", kinds={"python"}, code_version="1")
def evalset_file(settings: RagEvalSettings) -> dg.MaterializeResult:
    """sha256 of the evalset file (or BEIR folder): the evalset is read again when it changes."""
    s = settings.load()
    sha = fingerprint(s, EVALSET_FILE)
    return dg.MaterializeResult(data_version=dg.DataVersion(sha), metadata={"path": str(s.evalset.path), "sha256": sha})


@dg.asset(group_name="inputs", kinds={"python"}, code_version="1")
def corpus_files(settings: RagEvalSettings) -> dg.MaterializeResult:
    """sha256 over the corpus files: the corpus is read and chunked again when any of them changes."""
    s = settings.load()
    sha = fingerprint(s, CORPUS_FILES)
    return dg.MaterializeResult(data_version=dg.DataVersion(sha), metadata={"path": str(s.corpus.path), "sha256": sha})


@dg.asset(group_name="report", kinds={"python"}, code_version="1")
def grades_file(settings: RagEvalSettings) -> dg.MaterializeResult:
    """sha256 of the grades beside the evalset (judging/grades.py): the run directory and its report are made again
    when a person has graded, with the agreement and the calibrated estimates, and nothing is answered or judged
    again."""
    s = settings.load()
    sha = fingerprint(s, GRADES_FILE)
    return dg.MaterializeResult(data_version=dg.DataVersion(sha),
                                metadata={"path": str(grades_path(s.evalset.path)), "sha256": sha})


def fingerprint_defs(settings: Settings) -> dg.Definitions:
    @dg.asset(group_name="retrieval", kinds={"python"}, code_version="1",
              partitions_def=retriever_partitions(settings))
    def retriever_config(context: dg.AssetExecutionContext, settings: RagEvalSettings) -> dg.MaterializeResult:
        """The settings one retriever's results depend on (its parameters, depth, level, folder filter): its
        partition of retrieval_results goes stale when they change, the other retrievers' partitions do not."""
        s = settings.load()
        name = context.partition_key
        return dg.MaterializeResult(data_version=dg.DataVersion(fingerprint(s, RETRIEVER_CONFIG, name)),
                                    metadata={"parameters": dg.MetadataValue.json(retriever_params(s, name))})

    return dg.Definitions(assets=[evalset_file, corpus_files, retriever_config, grades_file])
