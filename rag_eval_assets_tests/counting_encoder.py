"""An encoder wrapper that records every batch a real encoder is asked to encode (tests count encoder calls)."""

import numpy as np

from rag_eval_assets.retrieval.encoders import Kind


class CountingEncoder:
    """Wraps a real encoder and records every batch it is asked to encode."""

    def __init__(self, inner):
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.device = inner.device
        self.batches: list[list[str]] = []

    def input_text(self, text: str, kind: Kind) -> str:
        return self.inner.input_text(text, kind)

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        self.batches.append(list(texts))
        return self.inner.encode(texts, kind)

    @property
    def encoded(self) -> int:
        return sum(len(b) for b in self.batches)
