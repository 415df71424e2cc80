"""Answerers, LLM clients and their cache, built from settings (shared by the answer-side assets)."""

from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from rag_eval_assets.generation.answerers import HttpAnswerer, LLMAnswerer
from rag_eval_assets.generation.extractive import ExtractiveAnswerer
from rag_eval_assets.llm.cache import LLMCache
from rag_eval_assets.llm.client import LLMClient
from rag_eval_assets.llm.settings import NO_LLM
from rag_eval_assets.retrieval.registry import kind_of
from rag_eval_assets.retrieval.sut_responses import read_responses
from rag_eval_assets.retrieval.sut_url import shown_url
from rag_eval_assets.settings import Settings


@contextmanager
def llm_client(settings: Settings, api_key: str | None) -> Iterator[LLMClient]:
    if settings.llm is None:
        raise ValueError(NO_LLM)
    cache = LLMCache(Path(settings.cache_dir) / "llm.sqlite")
    try:
        with LLMClient(settings.llm, cache, api_key) as client:
            yield client
    finally:
        cache.close()


@contextmanager
def answerer_for(settings: Settings, retriever: str, api_key: str | None, sut_responses: pd.DataFrame | None):
    """A service under test answered in its stored responses; our retrievers' contexts go to the configured
    answerer."""
    variant = settings.variants[retriever]
    if kind_of(variant).own_answers:
        url = shown_url(variant.params.base_url, variant.params.path)
        yield HttpAnswerer(read_responses(sut_responses, url), url)
    elif settings.answering.answerer == "llm":
        with llm_client(settings, api_key) as client:
            yield LLMAnswerer(client)
    else:
        yield ExtractiveAnswerer(language=settings.corpus.language, threshold=settings.answering.extractive_threshold)
