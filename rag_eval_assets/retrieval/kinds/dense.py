"""`kind: dense`: exact cosine search over one sentence encoder's chunk vectors (retrieval/dense.py). One dense index
per model and backend, shared by every variant that uses it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, StrictStr

from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.registry import BuiltIndexes, IndexNeed, Variant
from rag_eval_assets.retrieval.retrievers import DenseRetriever
from rag_eval_assets.settings_base import Section, problem

DENSE_INDEX = "dense_index"


def _device(device: str) -> str:
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", device):
        raise problem(f"{device!r} is not one of auto, cpu, cuda, cuda:N, mps")
    return device


class DenseParams(Section):
    model: StrictStr = "all-MiniLM-L6-v2"  # packaged offline; "use-multilingual-v3", a local path or a cached model id
    device: Annotated[StrictStr, AfterValidator(_device)] = "auto"  # CUDA, then Apple MPS, then CPU (recorded)
    # Opt-in faster CPU encoding (the fast-cpu extra, docs/encoders.md); quantised vectors differ, so the backend is
    # part of the index's model id.
    backend: Literal["torch", "onnx", "onnx-int8", "openvino"] = "torch"


def index_key(params: DenseParams) -> str:
    """The dense index of a model and backend: the model's name (a local directory's name and a hash of its path),
    then `__backend` unless torch. The device is not part of it: every device gives the same vectors."""
    name = params.model
    if "/" in name or "\\" in name:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{Path(name).name}-{digest}"
    if params.backend != "torch":
        name = f"{name}__{params.backend}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


class DenseKind:
    name: ClassVar[str] = "dense"
    Params: ClassVar[type[BaseModel]] = DenseParams
    own_answers: ClassVar[bool] = False
    score_column: ClassVar[str | None] = "score_dense"

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [IndexNeed(DENSE_INDEX, index_key(variant.params), variant.params)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> DenseRetriever:
        (need,) = self.needs(variant, indexes.language)
        index: DenseIndex = indexes.get(need)
        return DenseRetriever(index)


KIND = DenseKind()
