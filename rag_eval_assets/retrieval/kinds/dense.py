"""`kind: dense`: exact cosine search over one sentence encoder's chunk vectors (retrieval/dense.py). Its index
family, `dense_index`, has one index per model and backend (`dense_index/<model>`), shared by every variant that uses
it."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import pandas as pd
from pydantic import AfterValidator, BaseModel, StrictStr

from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.embedding_cache import text_key
from rag_eval_assets.retrieval.index_families import BuiltIndex, IndexEnv, IndexFamily, IndexNeed
from rag_eval_assets.retrieval.index_tables import dense_from_frame, dense_to_frame
from rag_eval_assets.retrieval.registry import BuiltIndexes, Variant
from rag_eval_assets.retrieval.retrievers import DenseRetriever
from rag_eval_assets.settings_base import Section, problem


def _device(device: str) -> str:
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", device):
        raise problem(f"{device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    return device


class DenseSettings(Section):
    model: StrictStr = "all-MiniLM-L6-v2"  # packaged offline; "use-multilingual-v3", a local path or a cached model id
    device: Annotated[StrictStr, AfterValidator(_device)] = "auto"  # CUDA, then Apple MPS, then CPU (recorded)
    # Opt-in faster CPU encoding (the fast-cpu extra, docs/encoders.md); quantised vectors differ, so the backend is
    # part of the index's model id.
    backend: Literal["torch", "onnx", "onnx-int8", "openvino"] = "torch"


def index_key(params: DenseSettings) -> str:
    """The dense index of a model and backend: the model's name (a local directory's name and a hash of its path),
    then `__backend` unless torch. The device is not part of it: every device gives the same vectors."""
    name = params.model
    if "/" in name or "\\" in name:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{Path(name).name}-{digest}"
    if params.backend != "torch":
        name = f"{name}__{params.backend}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _build(need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> BuiltIndex:
    """Only chunks not in the embedding cache are encoded."""
    encoder, cache = env.encoder(need.spec), env.embedding_cache
    texts = chunks["text"].tolist()
    known = len(cache.get(encoder.model_id, [text_key(encoder.input_text(t, "passage")) for t in texts]))
    start = time.perf_counter()

    def progress(done: int, total: int, rate: float) -> None:
        env.log(f"{need.key}: encoded {done}/{total} texts ({rate:.1f} texts/s)")

    index = DenseIndex.build(texts, encoder, cache, progress=progress)
    seconds = time.perf_counter() - start
    env.log(f"encoded {len(texts) - known} of {len(texts)} chunks in {seconds:.1f}s")
    return BuiltIndex(index, {"embedding_model": encoder.model_id}, {
        "embedding_model": encoder.model_id,
        "device": encoder.device,
        "backend": need.spec.backend,
        "dim": encoder.dim,
        "encoded": len(texts) - known,
        "from_cache": known,
        "encode_seconds": seconds,
    })


def _from_table(table: pd.DataFrame, need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> DenseIndex:
    encoder = env.encoder(need.spec)
    return DenseIndex(dense_from_frame(table, chunks["chunk_id"], encoder.model_id), encoder, env.embedding_cache)


DENSE_INDEX = IndexFamily(
    name="dense_index",
    description="Unit vectors of every chunk under one model; only chunks not in the embedding cache are encoded.",
    build=_build,
    to_table=lambda index, chunk_ids: dense_to_frame(index.vectors, chunk_ids, index.model_id),
    from_table=_from_table,
    version=lambda need: {"embedding_model": need.key},
    keyed=True,
    asset_kinds=frozenset({"pandas", "parquet", "pytorch"}),
    device=lambda need: need.spec.device,
)


class DenseKind:
    name: ClassVar[str] = "dense"
    Params: ClassVar[type[BaseModel]] = DenseSettings
    own_answers: ClassVar[bool] = False
    role: ClassVar[str | None] = "semantic"

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [IndexNeed(DENSE_INDEX, index_key(variant.params), variant.params)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> DenseRetriever:
        (need,) = self.needs(variant, indexes.language)
        index: DenseIndex = indexes.get(need)
        return DenseRetriever(index)


KIND = DenseKind()
