"""The first step of the inputs job: every input check (rag_eval_assets/preflight.py) before any table is written.
Every input and index asset depends on it, so it runs first in any selection of them (a run that re-does only
gold_labels checks first too); its constant data version makes none of them stale."""


import dagster as dg

from rag_eval_assets.defs.resources import RagEvalSettings
from rag_eval_assets.preflight import preflight as check_inputs


# A pass changes no data: the input assets go stale through their own fingerprints and settings, not through this.
PASSED = dg.DataVersion("passed")


@dg.asset(group_name="inputs", kinds={"python"}, code_version="1")
def preflight(settings: RagEvalSettings) -> dg.MaterializeResult:
    """Configuration, the credentials it names by environment variable (llm and service keys, service headers: set
    and usable, their values never shown), evalset (parsed, validated, frozen version unchanged), corpus, chunking
    and gold resolution, checked before the input assets run: a problem fails this step, so nothing is written.
    Stores no table; runs with every run of the inputs job that materializes anything (defs/staleness.py)."""
    return dg.MaterializeResult(metadata=check_inputs(settings.load()), data_version=PASSED)
