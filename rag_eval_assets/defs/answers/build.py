"""Answerers, LLM clients and their cache, built from settings (shared by the answer-side assets)."""

from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from rag_eval_assets.credentials import headers_from_env
from rag_eval_assets.generation.answerers import HttpAnswerer, LLMAnswerer
from rag_eval_assets.generation.extractive import ExtractiveAnswerer
from rag_eval_assets.llm.cache import LLMCache
from rag_eval_assets.llm.client import LLMClient
from rag_eval_assets.llm.settings import NO_LLM
from rag_eval_assets.redaction import redact_url
from rag_eval_assets.retrieval.registry import kind_of
from rag_eval_assets.retrieval.sut_responses import read_responses
from rag_eval_assets.retrieval.sut_url import shown_url
from rag_eval_assets.settings import Settings


@contextmanager
def llm_client(settings: Settings, role: str, api_key: str | None) -> Iterator[LLMClient]:
    """The client of `role`'s endpoint (Settings.llm_for), with its key and the headers its headers_env holds."""
    endpoint = settings.llm_for(role)
    if endpoint is None:
        raise ValueError(NO_LLM)
    headers = headers_from_env(endpoint.headers_env, f"{settings.llm_key(role)}.headers_env")
    cache = LLMCache(Path(settings.cache_dir) / "llm.sqlite")
    try:
        with LLMClient(endpoint, cache, api_key, headers=headers) as client:
            yield client
    finally:
        cache.close()


def ragas_llm_on(settings: Settings) -> bool:
    """Whether ragas' context metrics are judged by an LLM: only when asked for (ragas.llm_metrics) and an endpoint
    serves the role."""
    return settings.ragas.llm_metrics and settings.llm_for("ragas") is not None


def ragas_endpoint(settings: Settings) -> str:
    """Which endpoint ragas' context metrics call, for the asset's metadata (the URL redacted), or why none."""
    if not settings.ragas.llm_metrics:
        return "off (ragas.llm_metrics: false): ragas' non-LLM context metrics, no call"
    endpoint = settings.llm_for("ragas")
    if endpoint is None:
        return f"off: {NO_LLM}"
    return f"{endpoint.model} at {redact_url(endpoint.base_url)} ({settings.llm_key('ragas')})"


@contextmanager
def answerer_for(settings: Settings, retriever: str, api_key: str | None, sut_responses: pd.DataFrame | None):
    """A service under test answered in its stored responses; our retrievers' contexts go to the configured
    answerer."""
    variant = settings.variants[retriever]
    if kind_of(variant).own_answers:
        url = shown_url(variant.params.base_url, variant.params.path)
        yield HttpAnswerer(read_responses(sut_responses, url), url)
    elif settings.answering.answerer == "llm":
        with llm_client(settings, "answerer", api_key) as client:
            yield LLMAnswerer(client)
    else:
        yield ExtractiveAnswerer(language=settings.corpus.language, threshold=settings.answering.extractive_threshold)
