"""The partitions of the evaluation grid, from rag_eval.yaml: adding a retriever or a k adds partitions, no code."""

import dagster as dg

from rag_eval_assets.settings import Settings


def retriever_partitions(settings: Settings) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(list(settings.retrievers))


def answer_grid_partitions(settings: Settings) -> dg.MultiPartitionsDefinition:
    # Static partitions keep the configured order, so k shows as 5, 10, 20 rather than "10" < "20" < "5".
    return dg.MultiPartitionsDefinition(
        {
            "retriever": retriever_partitions(settings),
            "k": dg.StaticPartitionsDefinition([str(k) for k in settings.answering.k_values]),
        }
    )
