"""The inputs domain: evalset, corpus, chunks and gold labels."""


import dagster as dg

from rag_eval_assets.defs.inputs.corpus import chunks, chunks_schema, corpus_documents, gold_labels
from rag_eval_assets.defs.inputs.evalset import dev_subset, evalset
from rag_eval_assets.defs.inputs.preflight import preflight


def inputs_defs() -> dg.Definitions:
    return dg.Definitions(
        assets=[preflight, evalset, dev_subset, corpus_documents, chunks, gold_labels],
        asset_checks=[chunks_schema],
    )
