"""`backend: auto` (retrieval/backend_choice.py): the choice follows the measured times, never takes a backend outside
the accuracy bound, skips what is not installed with the reason, keeps torch on a GPU, and is cached per CPU, model
and package versions. Real encoders (torch, and ONNX Runtime exported into this module's folder) on the sample
corpus's texts give the vectors (each text list encoded once); the timings are injected (each wrapped backend advances the measurement's clock by
its own seconds per encode) and perturbed vectors are fault injection."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import threading

import numpy as np
import pandas as pd
import pytest

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.retrieval import backend_choice
from rag_eval_assets.retrieval.backend_choice import NDCG_BOUND, choose_backend, ndcg_against
from rag_eval_assets.retrieval.cpu_backends import BackendNotInstalledError
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache
from rag_eval_assets.retrieval.encoders import Kind, get_encoder
from rag_eval_assets.retrieval.index_families import IndexEnv, IndexNeed
from rag_eval_assets.retrieval.index_tables import dense_to_frame
from rag_eval_assets.retrieval.kinds.dense import DENSE_INDEX, DenseSettings, index_key
from rag_eval_assets_tests.sample_config import SAMPLE

MODEL = "all-MiniLM-L6-v2"


class Clock:
    """The measurement's clock: it moves only when a Timed backend encodes."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Timed:
    """A real encoder that takes `seconds` per encode on `clock`; `perturbed`: its vectors pushed off by noise about
    as long as themselves (a fast and wrong backend)."""

    def __init__(self, inner, seconds: float, clock: Clock, perturbed: bool = False):
        self.inner, self.model_id, self.dim, self.device = inner, inner.model_id, inner.dim, inner.device
        self.seconds, self.clock, self.perturbed = seconds, clock, perturbed

    def input_text(self, text: str, kind: Kind) -> str:
        return self.inner.input_text(text, kind)

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        self.clock.now += self.seconds
        vectors = self.inner.encode(texts, kind)
        if not self.perturbed:
            return vectors
        noise = np.random.default_rng(len(texts)).normal(0, vectors.shape[1] ** -0.5, vectors.shape)
        noisy = vectors + noise.astype(np.float32)
        return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """24 of the sample corpus's chunks, cut to 150 characters."""
    chunks = chunk_documents(load_corpus(SAMPLE / "corpus"), "sample", ChunkerParams())
    return [text[:150] for text in chunks["text"][:24]]


class Remembered:
    """A real encoder that encodes each list of texts once: the tests measure the same sample many times, and only
    the (injected) time of an encode matters to them, not its cost."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dim, self.device = inner, inner.model_id, inner.dim, inner.device
        self.seen: dict[tuple, np.ndarray] = {}

    def input_text(self, text: str, kind: Kind) -> str:
        return self.inner.input_text(text, kind)

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        key = (kind, *texts)
        if key not in self.seen:
            self.seen[key] = self.inner.encode(texts, kind)
        return self.seen[key].copy()


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict:
    exports = tmp_path_factory.mktemp("exports")
    return {backend: Remembered(get_encoder(MODEL, device="cpu", backend=backend, cache_dir=exports))
            for backend in ("torch", "onnx")}


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(backend_choice, "timer", clock)
    return clock


def offering(encoders: dict):
    """An encoder factory offering these backends; the others are reported as not installed."""
    asked: list[str] = []

    def encoder_of(backend: str):
        asked.append(backend)
        if backend not in encoders:
            raise BackendNotInstalledError(f"backend {backend!r} is not offered in this test")
        return encoders[backend]

    encoder_of.asked = asked
    return encoder_of


def choose(texts, encoder_of, tmp_path, device="cpu"):
    return choose_backend(MODEL, device, texts, encoder_of, cache_file=tmp_path / "choice.json")


def test_the_fastest_backend_within_the_bound_wins_and_the_record_says_why(texts, real, clock, tmp_path):
    choice = choose(texts, offering({"torch": Timed(real["torch"], 1.0, clock),
                                     "onnx": Timed(real["onnx"], 0.5, clock),
                                     "onnx-int8": Timed(real["onnx"], 0.4, clock)}), tmp_path)
    record, figures = choice.record, choice.record["backends"]
    assert choice.backend == "onnx-int8" and not choice.from_cache
    assert {b: (f["seconds"], f["speedup"], f["texts_per_s"]) for b, f in figures.items() if "seconds" in f} == {
        "torch": (1.0, 1.0, 24.0), "onnx": (0.5, 2.0, 48.0), "onnx-int8": (0.4, 2.5, 60.0)}
    assert figures["torch"]["ndcg@10_vs_torch"] == 1.0
    assert figures["onnx"]["ndcg@10_vs_torch"] >= 1 - NDCG_BOUND  # fp32 ONNX ranks as torch does
    assert figures["torch"]["verdict"] == "the fp32 reference"
    assert figures["onnx"]["verdict"] == "2.00x torch: slower than onnx-int8"
    assert figures["onnx-int8"]["verdict"] == "2.50x torch: the fastest within the bound"
    assert figures["openvino"] == {"skipped": "backend 'openvino' is not offered in this test"}
    assert figures["onnx"]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2@onnx"
    assert record["reason"] == (
        f"onnx-int8: 2.50x torch at nDCG@10 {figures['onnx-int8']['ndcg@10_vs_torch']:.4f} against torch's ranking, "
        f"the fastest within the bound (torch 1.00s nDCG@10 1.0000; onnx 0.50s nDCG@10 "
        f"{figures['onnx']['ndcg@10_vs_torch']:.4f}; onnx-int8 0.40s nDCG@10 "
        f"{figures['onnx-int8']['ndcg@10_vs_torch']:.4f})")
    assert record["sample"] == {"passages": 24, "queries": 24, "rounds": 2, "seed": 0}
    assert record["machine"]["cpu"] == backend_choice.cpu_model() and record["machine"]["model"] == MODEL


@pytest.mark.parametrize(("seconds", "chosen"), [(0.95, "torch"), (0.9, "onnx")])
def test_a_backend_must_beat_torch_by_the_margin(texts, real, clock, tmp_path, seconds, chosen):
    choice = choose(texts, offering({"torch": Timed(real["torch"], 1.0, clock),
                                     "onnx": Timed(real["onnx"], seconds, clock)}), tmp_path)
    assert choice.backend == chosen
    if chosen == "torch":
        assert choice.record["backends"]["onnx"]["verdict"] == "1.05x torch: short of the 1.1x margin over torch"
        assert choice.record["reason"].startswith("torch: no backend within the accuracy bound is 1.1x faster than "
                                                  "torch (torch 1.00s nDCG@10 1.0000; onnx 0.95s nDCG@10 ")


def test_a_backend_outside_the_accuracy_bound_is_never_chosen_even_when_fastest(texts, real, clock, tmp_path):
    choice = choose(texts, offering({"torch": Timed(real["torch"], 1.0, clock),
                                     "onnx": Timed(real["onnx"], 0.5, clock),
                                     "openvino": Timed(real["onnx"], 0.1, clock, perturbed=True)}), tmp_path)
    wrong = choice.record["backends"]["openvino"]
    assert choice.backend == "onnx"
    assert wrong["speedup"] == 10.0 and wrong["ndcg@10_vs_torch"] < 1 - NDCG_BOUND
    assert wrong["verdict"] == f"outside the accuracy bound: nDCG@10 {wrong['ndcg@10_vs_torch']:.4f} < 0.995"
    alone = choose(texts, offering({"torch": Timed(real["torch"], 1.0, clock),
                                    "openvino": Timed(real["onnx"], 0.1, clock, perturbed=True)}), tmp_path / "b")
    assert alone.backend == "torch"


def test_a_backend_whose_packages_are_missing_is_skipped_with_the_reason(texts, tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("onnxruntime", "openvino") else real_find_spec(name, *a))
    choice = choose(texts, lambda backend: get_encoder(MODEL, device="cpu", backend=backend, cache_dir=tmp_path),
                    tmp_path)
    hint = "not installed: pip install 'rag-eval-assets[fast-cpu]'"
    assert choice.backend == "torch"
    assert choice.record["backends"] == {
        "onnx": {"skipped": f"backend 'onnx' needs onnxruntime, {hint}"},
        "onnx-int8": {"skipped": f"backend 'onnx-int8' needs onnxruntime, {hint}"},
        "openvino": {"skipped": f"backend 'openvino' needs openvino, {hint}"},
    }
    assert choice.record["reason"].startswith("torch: no other backend can run here (onnx: backend 'onnx' needs ")
    assert not (tmp_path / "models").exists()  # nothing exported for a backend that cannot run


def test_a_gpu_and_a_model_without_cpu_backends_keep_torch_without_measuring(texts, tmp_path):
    encoder_of = offering({})
    on_gpu = choose(texts, encoder_of, tmp_path, device="cuda")
    assert on_gpu.backend == "torch"
    assert on_gpu.record["reason"] == ("device cuda: torch encodes on the GPU; the other backends run on the CPU "
                                       "only")
    use = choose_backend("use-multilingual-v3", "auto", texts, encoder_of, cache_file=tmp_path / "choice.json")
    assert use.backend == "torch" and use.record["reason"] == "use-multilingual-v3 runs on numpy: it has no other backend"
    assert encoder_of.asked == [] and not (tmp_path / "choice.json").exists()


def test_the_choice_is_cached_per_cpu_model_and_package_versions(texts, real, clock, tmp_path, monkeypatch):
    first = offering({"torch": Timed(real["torch"], 1.0, clock), "onnx": Timed(real["onnx"], 0.5, clock)})
    measured = choose(texts, first, tmp_path)
    assert not measured.from_cache and first.asked == ["torch", "onnx", "onnx-int8", "openvino"]

    # Measured now, onnx would lose: the cache keeps the machine's choice.
    again = offering({"torch": Timed(real["torch"], 1.0, clock), "onnx": Timed(real["onnx"], 2.0, clock)})
    said: list[str] = []
    cached = choose_backend(MODEL, "cpu", texts, again, said.append, cache_file=tmp_path / "choice.json")
    assert cached.from_cache and again.asked == []
    # A run that measured nothing still says in its log which backend encodes and why.
    assert said == [f"backend auto: onnx, this machine's choice measured {measured.record['measured_at']} "
                    f"({tmp_path / 'choice.json'}): {measured.record['reason']}"]
    assert cached.backend == measured.backend == "onnx" and cached.record == measured.record

    monkeypatch.setattr(backend_choice, "cpu_model", lambda: "Another CPU")
    on_another_cpu = offering({"torch": Timed(real["torch"], 1.0, clock), "onnx": Timed(real["onnx"], 2.0, clock)})
    remeasured = choose(texts, on_another_cpu, tmp_path)
    assert not remeasured.from_cache and on_another_cpu.asked and remeasured.backend == "torch"
    assert remeasured.record["machine"]["cpu"] == "Another CPU"

    real_version = backend_choice._version
    monkeypatch.setattr(backend_choice, "_version", lambda p: "99.0" if p == "onnxruntime" else real_version(p))
    newer = offering({"torch": real["torch"]})
    assert not choose(texts, newer, tmp_path).from_cache and newer.asked
    stored = json.loads((tmp_path / "choice.json").read_text())
    assert sorted(r["machine"]["cpu"] for r in stored.values()) == sorted([measured.record["machine"]["cpu"],
                                                                          "Another CPU", "Another CPU"])
    assert {r["machine"]["versions"]["onnxruntime"] for r in stored.values()} >= {"99.0"}


def test_a_measurement_holds_the_lock_so_a_concurrent_run_waits_and_reads_it(texts, real, tmp_path):
    measuring, release = threading.Event(), threading.Event()

    def held_up(backend: str):
        if backend == "torch":
            measuring.set()
            assert release.wait(60)
            return real["torch"]
        raise BackendNotInstalledError(f"backend {backend!r} is not offered in this test")

    first = []
    thread = threading.Thread(target=lambda: first.append(choose(texts, held_up, tmp_path)))
    thread.start()
    assert measuring.wait(60)
    with open(tmp_path / "choice.lock", "a") as handle, pytest.raises(BlockingIOError):
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process could not measure now
    release.set()
    thread.join(60)
    second = offering({"torch": real["torch"]})
    assert choose(texts, second, tmp_path).from_cache and second.asked == [] and not first[0].from_cache


def test_a_damaged_cache_file_is_a_clear_error(texts, tmp_path):
    (tmp_path / "choice.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"choice.json: not the JSON backend auto writes .*delete it to measure again"):
        choose(texts, offering({}), tmp_path)


def test_ndcg_against_torch_scores_as_graded_relevance():
    reference = np.array([[0.9, 0.5, 0.1, -0.2], [-0.1, -0.3, -0.2, -0.4]])
    assert ndcg_against(reference, reference) == 1.0
    swapped = np.array([[0.5, 0.9, 0.1, -0.2], [0.0, 0.0, 0.0, 0.0]])
    # gains 0.9, 0.5, 0.1, 0 (negative as 0); the second query has no positive score and is left out
    ideal = 0.9 + 0.5 / np.log2(3) + 0.1 / 2
    assert ndcg_against(reference, swapped) == pytest.approx((0.5 + 0.9 / np.log2(3) + 0.1 / 2) / ideal)
    assert ndcg_against(reference, swapped, top=1) == pytest.approx(0.5 / 0.9)


def test_an_auto_index_is_searched_with_the_backend_that_encoded_it(texts, real, tmp_path):
    """Whichever machine loads it (its own choice may differ), queries go through the stored vectors' backend."""
    spec = DenseSettings()
    chunks = pd.DataFrame({"chunk_id": [f"c{i}" for i in range(len(texts))], "text": texts})
    table = dense_to_frame(real["onnx"].encode(texts, "passage"), chunks["chunk_id"], real["onnx"].model_id)
    asked = []

    def encoder(params: DenseSettings):
        asked.append(params.backend)
        return real[params.backend]

    env = IndexEnv(encoder, EmbeddingCache(tmp_path / "embeddings.sqlite"), lambda message: None)
    index = DENSE_INDEX.from_table(table, IndexNeed(DENSE_INDEX, index_key(spec), spec), chunks, env)
    assert asked == ["onnx"] and index.model_id == "sentence-transformers/all-MiniLM-L6-v2@onnx"
    [[(top, _)]] = index.search([texts[3]], depth=1)
    assert top == 3
