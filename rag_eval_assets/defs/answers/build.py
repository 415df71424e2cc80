"""Answerers, LLM clients and their cache, built from settings (shared by the answer-side assets)."""

from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

from rag_eval_assets.defs.retrieval.build import http_client
from rag_eval_assets.generation.answerers import HttpAnswerer, LLMAnswerer
from rag_eval_assets.generation.extractive import ExtractiveAnswerer
from rag_eval_assets.llm.cache import LLMCache
from rag_eval_assets.llm.client import LLMClient
from rag_eval_assets.settings import Settings

NO_LLM = "not computed: no llm endpoint configured (rag_eval.yaml: llm.base_url, llm.model)"


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
def answerer_for(settings: Settings, retriever: str, api_key: str | None):
    """The service under test answers its own questions; our retrievers' contexts go to the configured answerer."""
    if retriever == "http":
        with http_client(settings) as client:
            yield HttpAnswerer(client)
    elif settings.answering.answerer == "llm":
        with llm_client(settings, api_key) as client:
            yield LLMAnswerer(client)
    else:
        yield ExtractiveAnswerer(language=settings.corpus.language)
