"""The index environment of a configuration: its encoders (their errors naming the key of rag_eval.yaml; the CPU
backends exported into the machine cache, shared by every configuration on the machine) and its embedding cache, for
building and loading indexes (retrieval/index_families.py) in the pipeline and the labeler."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from rag_eval_assets.retrieval.backend_choice import machine_cache_dir
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache
from rag_eval_assets.retrieval.encoders import Encoder, EncoderConfigError, ModelNotAvailableError, get_encoder
from rag_eval_assets.retrieval.index_families import IndexEnv
from rag_eval_assets.retrieval.kinds.dense import DenseSettings
from rag_eval_assets.retrieval.registry import needs_of
from rag_eval_assets.settings import Settings


def embedding_cache(settings: Settings) -> EmbeddingCache:
    return EmbeddingCache(Path(settings.cache_dir) / "embeddings.sqlite")


def encoder_for(settings: Settings, params: DenseSettings) -> Encoder:
    """The encoder of a model's settings. `backend: auto` is decided where a dense index is built (kinds/dense.py
    passes the backend it chose); anything else that encodes with the dense settings (answer metrics) gets fp32
    torch, the reference, so a metric never depends on the machine it ran on."""
    backend = "torch" if params.backend == "auto" else params.backend
    try:
        return get_encoder(params.model, device=params.device, backend=backend, cache_dir=machine_cache_dir())
    except (ModelNotAvailableError, EncoderConfigError) as exc:
        def configured(spec: DenseSettings) -> bool:  # the setting, or the backend auto chose for it
            return spec == params or (spec.backend == "auto" and spec.model_copy(update={"backend": backend}) == params)

        users = [name for name, v in settings.variants.items()
                 if any(configured(n.spec) for n in needs_of({name: v}, settings.corpus.language))]
        where = ", ".join(f"retrievers.{name}" for name in users if name not in ("dense", "hybrid"))
        key = "model" if isinstance(exc, ModelNotAvailableError) else "device / backend"
        raise type(exc)(
            f"retrieval.dense.{key}{' of ' + where if where else ''} in {settings.config_file}: {exc}") from exc


@contextmanager
def index_env(settings: Settings, log: Callable[[str], None] = lambda message: None) -> Iterator[IndexEnv]:
    cache = embedding_cache(settings)
    try:
        yield IndexEnv(partial(encoder_for, settings), cache, log)
    finally:
        cache.close()
