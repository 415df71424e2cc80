"""`kind: dense`: exact cosine search over one sentence encoder's chunk vectors (retrieval/dense.py). Its index
family, `dense_index`, has one index per model and backend setting (`dense_index/<model>` for `auto`), shared by
every variant that uses it. With `backend: auto` the index is encoded by the backend retrieval/backend_choice.py
measures fastest within the accuracy bound on this machine, and its queries by the backend its stored vectors name."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import pandas as pd
from pydantic import AfterValidator, BaseModel, StrictStr

from rag_eval_assets.retrieval.backend_choice import choose_backend
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.embedding_cache import text_key
from rag_eval_assets.retrieval.encoders import backend_of
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
    # auto: the fastest backend within nDCG@10 0.005 of fp32 torch, measured on this machine (docs/encoders.md);
    # their vectors differ, so the backend is part of the index's model id.
    backend: Literal["auto", "torch", "onnx", "onnx-int8", "openvino"] = "auto"


def index_key(params: DenseSettings) -> str:
    """The dense index of a model and backend: the model's name (a local directory's name and a hash of its path),
    then `__backend` unless auto. The device is not part of it: every device gives the same vectors."""
    name = params.model
    if "/" in name or "\\" in name:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{Path(name).name}-{digest}"
    if params.backend != "auto":
        name = f"{name}__{params.backend}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _build(need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> BuiltIndex:
    """Only chunks not in the embedding cache are encoded; `auto` first decides the backend (cached per machine)."""
    texts, spec, choice = chunks["text"].tolist(), need.spec, None
    if spec.backend == "auto":
        choice = choose_backend(spec.model, spec.device, texts, lambda backend: env.encoder(_with(spec, backend)),
                                env.log)
        spec = _with(spec, choice.backend)
    encoder, cache = env.encoder(spec), env.embedding_cache
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
        "backend": spec.backend,
        "backend_setting": need.spec.backend,
        **({"backend_choice": choice.metadata()} if choice else {}),
        "dim": encoder.dim,
        "encoded": len(texts) - known,
        "from_cache": known,
        "encode_seconds": seconds,
    })


def _with(spec: DenseSettings, backend: str) -> DenseSettings:
    return spec.model_copy(update={"backend": backend})


def _from_table(table: pd.DataFrame, need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> DenseIndex:
    spec = need.spec
    if spec.backend == "auto" and len(table):  # queries go through the backend that encoded the stored vectors
        spec = _with(spec, backend_of(str(table["model_id"].iloc[0])))
    encoder = env.encoder(spec)
    return DenseIndex(dense_from_frame(table, chunks["chunk_id"], encoder.model_id), encoder, env.embedding_cache)


DENSE_INDEX = IndexFamily(
    name="dense_index",
    description="Unit vectors of every chunk under one model; only chunks not in the embedding cache are encoded.",
    build=_build,
    to_table=lambda index, chunk_ids: dense_to_frame(index.vectors, chunk_ids, index.model_id),
    from_table=_from_table,
    version=lambda need: {"embedding_model": need.key},
    keyed=True,
    # The key does not name `auto`: an index stored under the same key before auto existed was encoded by torch.
    reads=lambda need: {"backend": need.spec.backend},
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
