"""Opt-in CPU backends for sentence-transformers models: ONNX Runtime (fp32 or dynamic int8) and OpenVINO.

The whole SentenceTransformer forward (transformer, pooling, normalisation) is exported once, offline, from the local
model with torch.onnx, and kept under `<cache_dir>/models/<model>-<backend>/`; later runs load it from there.
Tokenisation stays the model's own (`SentenceTransformer.preprocess`), so the inputs are exactly those of the torch
path.

Why not `SentenceTransformer(backend="onnx" | "openvino")`: sentence-transformers 6.2 loads those backends through
optimum-onnx and optimum-intel, and every release of those requires transformers < 4.58 (optimum-onnx 0.1.0) or
< 5.6 with huggingface-hub < 1.22 (optimum-intel 2.2.0), while this project runs transformers 5.24 and
huggingface-hub 2.4. The int8 model is quantised with the configuration of sentence-transformers' own
`export_dynamic_quantized_onnx_model(model, "avx512_vnni", ...)`, restricted to MatMul (see docs/encoders.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

EXTRA_HINT = "pip install 'rag-eval-assets[fast-cpu]'"

_ONNX_FILE = "model.onnx"
_OPENVINO_FILE = "openvino_model.xml"
_STAMP_FILE = "export.json"
# Part of every export's fingerprint: changing how a backend is built invalidates the exports made the old way.
_EXPORT_FORMAT = {
    "onnx": "torch.onnx-opset17-v1",
    "onnx-int8": "ort-dynamic-avx512_vnni-matmul-v1",
    "openvino": "ov-ir-fp32-v1",
}
_OPSET = 17
_SAMPLE = ["a short text", "a somewhat longer text to trace the exported graph with"]

Runner = Callable[[dict[str, np.ndarray]], np.ndarray]


class BackendNotInstalledError(RuntimeError):
    """The packages a CPU backend runs on are not installed."""


def export_dir(cache_dir: Path, model_id: str, backend: str) -> Path:
    """Where the exported model lives: one folder per (model, backend), named readably after the model id."""
    slug = "--".join(part for part in model_id.replace("\\", "/").split("/") if part not in ("", "."))
    return Path(cache_dir) / "models" / f"{slug}-{backend}"


class ExportedModel:
    """A sentence-transformers model exported for `backend`; `encode` gives its sentence embeddings (float32)."""

    def __init__(self, model: SentenceTransformer, source: Path, model_id: str, backend: str, cache_dir: Path):
        _require(backend)
        self._model = model
        self.backend = backend
        fingerprint = _fingerprint(source)

        def exported(name: str, build: Callable[[Path], None]) -> Path:
            return _materialised(export_dir(cache_dir, model_id, name), f"{fingerprint}/{_EXPORT_FORMAT[name]}", build)

        onnx_fp32 = exported("onnx", lambda staging: _export_onnx(model, staging / _ONNX_FILE)) / _ONNX_FILE
        if backend == "onnx":
            self.path = onnx_fp32
            self._run, self.precision = _onnxruntime(self.path), "f32"
        elif backend == "onnx-int8":
            self.path = exported(backend, lambda staging: _quantise_int8(onnx_fp32, staging / _ONNX_FILE))
            self.path /= _ONNX_FILE
            self._run, self.precision = _onnxruntime(self.path), "int8"
        else:
            self.path = exported(backend, lambda staging: _convert_openvino(onnx_fp32, staging / _OPENVINO_FILE))
            self.path /= _OPENVINO_FILE
            self._run, self.precision = _openvino(self.path)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Embeddings in input order. Batches are cut from the texts sorted by length, as SentenceTransformer.encode
        does, so a batch pads to a similar length."""
        vectors = np.empty((len(texts), self._model.get_embedding_dimension()), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            features = self._model.preprocess([texts[i] for i in rows])
            # preprocess also returns non-tensor entries (the modality name); the graph takes the tensors.
            inputs = {name: value.numpy() for name, value in features.items() if hasattr(value, "numpy")}
            vectors[rows] = self._run(inputs)
        return vectors


def _fingerprint(source: Path) -> str:
    """Changes when any file of the source model changes (path, size or modification time)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(source).rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(source).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _is_current(folder: Path, fingerprint: str) -> bool:
    stamp = folder / _STAMP_FILE
    return stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")).get("fingerprint") == fingerprint


def _materialised(folder: Path, fingerprint: str, build: Callable[[Path], None]) -> Path:
    """`folder`, built by `build(staging folder)` unless an export of the same source and format is already there.

    The build happens in a staging folder that is renamed into place at the end, so a process killed mid-export leaves
    no half-written model behind, and of two processes exporting at once the second simply uses the first's result.
    """
    if _is_current(folder, fingerprint):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build(staging)
        (staging / _STAMP_FILE).write_text(json.dumps({"fingerprint": fingerprint}) + "\n", encoding="utf-8")
        if folder.exists():  # an export of an older version of the model
            shutil.rmtree(folder)
        try:
            os.replace(staging, folder)
        except OSError:
            if not _is_current(folder, fingerprint):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _require(backend: str) -> None:
    """Fails before any export when the packages `backend` runs on are missing."""
    modules = ["onnx", "openvino"] if backend == "openvino" else ["onnx", "onnxruntime"]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise BackendNotInstalledError(f"backend {backend!r} needs {', '.join(missing)}, not installed: {EXTRA_HINT}")


def _export_onnx(model: SentenceTransformer, path: Path) -> None:
    import torch

    sample = model.preprocess(_SAMPLE)
    names = [name for name, value in sample.items() if isinstance(value, torch.Tensor)]

    class SentenceEmbedding(torch.nn.Module):
        """The model's forward with positional tensor inputs (what tracing needs) and one output."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, tensors)))["sentence_embedding"]

    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"sentence_embedding": {0: "batch"}}
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript exporter (dynamo=False) is deprecated in favour of the dynamo one, which needs onnxscript and
        # takes far longer for the same graph; torch is pinned, so the deprecation is only noise here.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            SentenceEmbedding().eval(), tuple(sample[n] for n in names), str(path),
            input_names=names, output_names=["sentence_embedding"], dynamic_axes=axes, opset_version=_OPSET,
            dynamo=False,
        )


def _quantise_int8(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation of the MatMul weights: uint8 activations quantised per batch at run time, symmetric
    int8 weights per output channel, full 8-bit range (optimum's AutoQuantizationConfig.avx512_vnni, the preset of
    sentence-transformers' export_dynamic_quantized_onnx_model(model, "avx512_vnni", ...)), restricted to MatMul.
    The preset also quantises the token-embedding Gather, which cost 0.011 nDCG@10 on XQuAD-ru (docs/encoders.md)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # onnxruntime advises, as a warning on the root logger, a shape pre-processing meant for static quantisation;
    # dynamic MatMul quantisation has no use for it, and the advice reached the terminal of `rag-eval run`.
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_advice)
    try:
        quantize_dynamic(
            source, target, op_types_to_quantize=["MatMul"], per_channel=True, reduce_range=False,
            weight_type=QuantType.QInt8, extra_options={"WeightSymmetric": True, "ActivationSymmetric": False},
        )
    finally:
        root.removeFilter(_no_preprocessing_advice)


def _no_preprocessing_advice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Please consider to run pre-processing before quantization")


def _convert_openvino(source: Path, target: Path) -> None:
    import openvino as ov

    # Core.read_model reads the ONNX file itself (openvino.convert_model would too, but it reports telemetry).
    # compress_to_fp16=False keeps the stored weights fp32; the precision is chosen when the model is compiled.
    ov.save_model(ov.Core().read_model(str(source)), str(target), compress_to_fp16=False)


def _onnxruntime(path: Path) -> Runner:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda features: session.run(None, {n: features[n] for n in names})[0]


def _openvino(path: Path) -> tuple[Runner, str]:
    """The compiled model and the precision OpenVINO runs it in: its CPU default, bf16 where the CPU computes bf16
    natively (AVX512-BF16, AMX), else f32."""
    import openvino as ov

    compiled = ov.Core().compile_model(str(path), "CPU")
    precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    names = [port.any_name for port in compiled.inputs]
    output = compiled.output(0)
    return (lambda features: compiled({n: features[n] for n in names})[output]), precision
