"""The inputs domain: evalset, corpus, chunks and gold labels."""


import dagster as dg

from rag_eval_assets.defs.inputs.corpus import chunk_set_assets, chunks, chunks_schema, corpus_documents, gold_labels
from rag_eval_assets.defs.inputs.evalset import dev_subset, evalset
from rag_eval_assets.defs.inputs.preflight import preflight
from rag_eval_assets.settings import Settings


def inputs_defs(settings: Settings) -> dg.Definitions:
    """The inputs, with the chunks and gold labels of every chunking a variant names besides the top-level one."""
    chunk_sets, chunk_set_checks = chunk_set_assets(settings)
    return dg.Definitions(
        assets=[preflight, evalset, dev_subset, corpus_documents, chunks, gold_labels, *chunk_sets],
        asset_checks=[chunks_schema, *chunk_set_checks],
    )
