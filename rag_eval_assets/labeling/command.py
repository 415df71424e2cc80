"""`rag-eval label`: set up the chunk source, the question selection and the checks, then run the App."""

from __future__ import annotations

import sys
from pathlib import Path

from rag_eval_assets.corpus.chunking import ChunkerParams
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.evalset.load import load_evalset
from rag_eval_assets.labeling.app import SAVED_AND_QUIT, LabelApp
from rag_eval_assets.labeling.candidates import HTTP, CorpusCandidates, SutCandidates, searchable_variants
from rag_eval_assets.labeling.resolution import ResolutionCheck
from rag_eval_assets.labeling.selection import failing_ids
from rag_eval_assets.labeling.session import LabelSession
from rag_eval_assets.runs.listing import latest_run
from rag_eval_assets.settings import Settings


def label(settings: Settings, evalset: Path, retriever: str | None, sut_url: str | None, k: int, only: str) -> int:
    run = latest_run(settings.runs_dir) if only == "failing" else None
    if only == "failing" and run is None:
        print(f"error: --only failing needs a run; {settings.runs_dir} holds none", file=sys.stderr)
        return 2
    documents = load_corpus(settings.corpus.path)
    if sut_url:
        source = SutCandidates(settings, sut_url)
    else:
        if retriever is None:
            searchable = searchable_variants(settings)
            if not searchable:
                print("error: no configured retriever searches our corpus; use --sut-url", file=sys.stderr)
                return 2
            retriever = "hybrid" if "hybrid" in searchable else searchable[0]
        print(f"building the {retriever} index over {settings.corpus.path} ...", file=sys.stderr)
        source = CorpusCandidates(settings, retriever, documents)
    c = settings.chunking
    check = ResolutionCheck(documents, settings.corpus.id, ChunkerParams(c.chunk_size_chars, c.overlap_chars))
    try:
        failing = None
        if run is not None:
            chunks = None if source.name == HTTP else source.chunks
            failing = failing_ids(run, source.name, k, load_evalset(evalset), chunks)
            print(f"{len(failing)} question(s) miss their gold in the top {k} of {source.name} in run {run.name}",
                  file=sys.stderr)
        session = LabelSession(evalset, source, k, only, failing, check)
        if not session.order:
            print(f"nothing to label in {evalset} with --only {only}")
            return 0
        app = LabelApp(session)
        outcome = app.run()
    finally:
        source.close()
    for result in app.saves:
        if result.backup:
            print(f"backup: {result.backup}")
        for problem in result.problems:
            print(f"does not resolve: {problem}")
    written = sorted({qid for result in app.saves for qid in result.written})
    print(f"{len(written)} question(s) labeled and saved to {evalset}"
          + ("" if outcome == SAVED_AND_QUIT else "; quit without saving the last changes"))
    return 0
