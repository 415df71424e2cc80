"""The partitions of the evaluation grid, from rag_eval.yaml: adding a retriever or a k adds partitions, no code."""

import dagster as dg

from rag_eval_assets.retrieval.registry import own_answer_variants
from rag_eval_assets.settings import Settings

SUT_GROUP = "sut"  # the sut_responses asset, run as its own stage before the retrieval grid


def retriever_partitions(settings: Settings) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(list(settings.retrievers))


def sut_partitions(settings: Settings) -> dg.StaticPartitionsDefinition:
    """The retrievers that are services under test: one sut_responses partition each."""
    return dg.StaticPartitionsDefinition(own_answer_variants(settings.variants))


def answer_grid_partitions(settings: Settings) -> dg.MultiPartitionsDefinition:
    # Static partitions keep the configured order, so k shows as 5, 10, 20 rather than "10" < "20" < "5".
    return dg.MultiPartitionsDefinition(
        {
            "retriever": retriever_partitions(settings),
            "k": dg.StaticPartitionsDefinition([str(k) for k in settings.answering.k_values]),
        }
    )
