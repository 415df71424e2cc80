"""`backend: auto`: the backend that encodes a dense index on this machine, chosen by measuring, not by CPU flags.

Which CPU backend beats fp32 torch depends on the CPU in ways its flags do not predict (OpenVINO has run at 0.70x
torch on one CPU with AVX512-BF16 and at 3.6x on another), so the backends are timed on the corpus's own texts and
their rankings compared with torch's (docs/encoders.md, "backend: auto", states the rule exactly):

1. A model on a GPU (`device` cuda or mps, or auto finding one) and a model without CPU backends
   (use-multilingual-v3) keep torch: nothing to measure.
2. A sample of the chunk texts, drawn with a fixed seed: SAMPLE_PASSAGES passages, and SAMPLE_QUERIES pseudo-queries
   (the first QUERY_WORDS words of other drawn chunks).
3. Every backend whose packages are installed encodes the passages ROUNDS times, the backends in a rotated order
   each round; a backend's time is its fastest round (the one least disturbed by other processes).
4. Each backend ranks the passages for every pseudo-query with its own query and passage vectors. Its nDCG@10 is
   computed with fp32 torch's cosine similarities (negative ones as 0) as the graded relevance, so torch scores 1;
   a backend is within the bound when its mean over the queries is at least 1 - NDCG_BOUND.
5. The fastest backend within the bound wins if it takes at most torch's time / MARGIN; otherwise torch.

The choice is cached in a JSON file of the machine cache (`machine_cache_dir()`), keyed by the CPU (model name, a
digest of its flags, its logical CPUs), the model, the versions of the packages the backends run on and METHOD, so
two runs on one machine encode with the same backend and only a changed key measures again.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval_assets.atomic_file import write_atomically
from rag_eval_assets.retrieval.cpu_backends import BackendNotInstalledError
from rag_eval_assets.retrieval.encoders import (
    BACKENDS,
    Encoder,
    EncoderConfigError,
    UniversalSentenceEncoder,
    resolve_device,
)

CACHE_ENV = "RAG_EVAL_MACHINE_CACHE"
CHOICE_FILE = "backend_choice.json"
REFERENCE = "torch"
CANDIDATES = tuple(b for b in BACKENDS if b != REFERENCE)
SAMPLE_PASSAGES, SAMPLE_QUERIES, QUERY_WORDS, SEED = 64, 32, 12, 0
ROUNDS = 2
TOP = 10
NDCG_BOUND = 0.005
MARGIN = 1.10
# Part of the cache key: a change to the sample, the criterion or the rule measures every machine again.
METHOD = f"v1:{SAMPLE_PASSAGES}/{SAMPLE_QUERIES}/{QUERY_WORDS}/{SEED}/{ROUNDS}/{TOP}/{NDCG_BOUND}/{MARGIN}"
# The packages whose versions change a backend's speed or vectors.
PACKAGES = ("torch", "sentence-transformers", "transformers", "onnx", "onnxruntime", "openvino")
RULE = (f"the fastest backend whose nDCG@{TOP} against fp32 torch's ranking is at least {1 - NDCG_BOUND:g} and that "
        f"takes at most torch's time / {MARGIN:g}; otherwise torch")

EncoderOf = Callable[[str], Encoder]
# The clock the encodes are timed with (a test's fault injection replaces it).
timer: Callable[[], float] = time.perf_counter


def machine_cache_dir() -> Path:
    """What this machine keeps for every configuration: the exported CPU backends and the backend choice.
    $RAG_EVAL_MACHINE_CACHE, else $XDG_CACHE_HOME/rag-eval-assets, else ~/.cache/rag-eval-assets."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-eval-assets"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what the platform reports)."""
    return _cpuinfo_field("model name") or platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> str:
    """The instructions the CPU reports: a VM moved to another host keeps its model name but may lose AVX512."""
    return _cpuinfo_field("flags") or _cpuinfo_field("Features") or ""


def _cpuinfo_field(name: str) -> str | None:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return None
    for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
        field, _, value = line.partition(":")
        if field.strip() == name:
            return value.strip()
    return None


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def machine_key(model: str) -> dict[str, Any]:
    """What a cached choice holds for: this CPU, the model, the backends' package versions, the method."""
    flags = " ".join(sorted(cpu_flags().split()))
    return {"cpu": cpu_model(), "cpu_flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:16],
            "cpus": os.cpu_count(), "model": model, "versions": {p: _version(p) for p in PACKAGES},
            "method": METHOD}


@dataclass(frozen=True)
class BackendChoice:
    """The backend to encode with; `record` is what the index's metadata shows (each backend's figures, the
    reason), `from_cache` whether it was measured by an earlier run on this machine."""

    backend: str
    record: dict[str, Any]
    from_cache: bool = False

    def metadata(self) -> dict[str, Any]:
        return {**self.record, "from_cache": self.from_cache}


def choose_backend(model: str, device: str, texts: list[str], encoder_of: EncoderOf,
                   log: Callable[[str], None] = lambda message: None, cache_file: Path | None = None) -> BackendChoice:
    """The backend for `model` on `device`: torch on a GPU or for a model without CPU backends, else the cached
    choice for this machine, measured on `texts` (the corpus's chunk texts) when there is none. `encoder_of(backend)`
    makes the model's encoder with that backend; a backend it reports as not installed or not usable is skipped
    with the reason."""
    if model == UniversalSentenceEncoder.model_id:
        return BackendChoice(REFERENCE, {"backend": REFERENCE, "reason": f"{model} runs on numpy: it has no other "
                                                                           "backend"})
    resolved = resolve_device(device) if device == "auto" else device
    if resolved != "cpu":
        return BackendChoice(REFERENCE, {"backend": REFERENCE, "reason": f"device {resolved}: torch encodes on the "
                                         "GPU; the other backends run on the CPU only"})
    cache_file = cache_file or machine_cache_dir() / CHOICE_FILE
    key = machine_key(model)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if (cached := _read(cache_file).get(digest)) is not None:
        return _cached(cached, cache_file, log)
    with _locked(cache_file):  # a second process waits, then takes the first one's measurement
        if (cached := _read(cache_file).get(digest)) is not None:
            return _cached(cached, cache_file, log)
        log(f"backend auto: measuring the backends of {model} on this CPU ({key['cpu']}) with the corpus's texts")
        record = {**measure(texts, encoder_of, log), "machine": key}
        _write(cache_file, {**_read(cache_file), digest: record})
    log(f"backend auto: {record['reason']}")
    return BackendChoice(record["backend"], record)


def _cached(record: dict[str, Any], cache_file: Path, log: Callable[[str], None]) -> BackendChoice:
    # Said in every run's log, so that a run which measured nothing still names its backend and why.
    log(f"backend auto: {record['backend']}, this machine's choice measured {record.get('measured_at', 'earlier')} "
        f"({cache_file}): {record['reason']}")
    return BackendChoice(record["backend"], record, from_cache=True)


def measure(texts: list[str], encoder_of: EncoderOf, log: Callable[[str], None] = lambda message: None
            ) -> dict[str, Any]:
    """Times and ranks the sample with every usable backend and applies the rule; the record of what was found."""
    start, load = time.perf_counter(), os.getloadavg()[0]  # the load other processes put on the machine
    passages, queries = sample(texts)
    encoders = {REFERENCE: encoder_of(REFERENCE)}
    skipped: dict[str, str] = {}
    for backend in CANDIDATES:
        try:
            encoders[backend] = encoder_of(backend)
        except (BackendNotInstalledError, EncoderConfigError) as exc:
            skipped[backend] = str(exc)
    sample_size = {"passages": len(passages), "queries": len(queries), "rounds": ROUNDS, "seed": SEED}
    if len(encoders) == 1:  # nothing to compare torch with: no time spent encoding
        why = "; ".join(f"{b}: {message}" for b, message in skipped.items())
        return {"backend": REFERENCE, "reason": f"torch: no other backend can run here ({why})", "rule": RULE,
                "backends": {b: {"skipped": message} for b, message in skipped.items()}, "sample": sample_size,
                "measured_at": _now(), "load_average_before": round(load, 2),
                "measure_seconds": round(time.perf_counter() - start, 1)}
    seconds, vectors = _timed(encoders, passages)
    log("backend auto: " + ", ".join(f"{b} {s:.2f}s" for b, s in seconds.items()) + f" for {len(passages)} texts")
    reference_scores = encoders[REFERENCE].encode(queries, "query") @ vectors[REFERENCE].T
    ndcg = {b: ndcg_against(reference_scores, encoders[b].encode(queries, "query") @ vectors[b].T)
            for b in encoders}
    backend, reason, verdicts = decide(seconds, ndcg)
    figures: dict[str, Any] = {
        b: {"model_id": encoders[b].model_id, "seconds": round(seconds[b], 4),
            "texts_per_s": round(len(passages) / seconds[b], 2), "speedup": round(seconds[REFERENCE] / seconds[b], 3),
            f"ndcg@{TOP}_vs_torch": round(ndcg[b], 5), "verdict": verdicts[b]}
        for b in encoders
    }
    figures.update({b: {"skipped": why} for b, why in skipped.items()})
    return {"backend": backend, "reason": reason, "rule": RULE, "backends": figures,
            "sample": sample_size, "measured_at": _now(), "load_average_before": round(load, 2),
            "measure_seconds": round(time.perf_counter() - start, 1)}


def sample(texts: list[str]) -> tuple[list[str], list[str]]:
    """SAMPLE_PASSAGES texts drawn with SEED, and a pseudo-query (the first QUERY_WORDS words) from each of the next
    SAMPLE_QUERIES drawn texts; a corpus too small for both takes its queries from the passages."""
    drawn = [texts[i] for i in np.random.default_rng(SEED).permutation(len(texts)) if texts[i].strip()]
    passages = drawn[:SAMPLE_PASSAGES]
    sources = drawn[SAMPLE_PASSAGES:SAMPLE_PASSAGES + SAMPLE_QUERIES]
    if len(sources) < SAMPLE_QUERIES:
        sources = passages[:SAMPLE_QUERIES]
    if not passages:
        raise ValueError("backend auto needs chunk texts to measure the backends on, and the corpus has none")
    return passages, [" ".join(text.split()[:QUERY_WORDS]) for text in sources]


def _timed(encoders: dict[str, Encoder], passages: list[str]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Each backend's fastest of ROUNDS encodes of the passages (rotated order), and its vectors."""
    names = list(encoders)
    for encoder in encoders.values():  # outside the timing: a backend's first call pays one-off allocations
        encoder.encode(passages[:8], "passage")
    times: dict[str, list[float]] = {name: [] for name in names}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(ROUNDS):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            begin = timer()
            vectors[name] = encoders[name].encode(passages, "passage")
            times[name].append(timer() - begin)
    return {name: min(t) for name, t in times.items()}, vectors


def ndcg_against(reference: np.ndarray, candidate: np.ndarray, top: int = TOP) -> float:
    """Mean nDCG@top of the candidate's rankings (one row of scores per query) with the reference scores, negative
    ones as 0, as graded relevance: 1 when the candidate's top `top` is the reference's in the same order. Queries
    whose reference scores are all <= 0 have no relevant passage and are left out."""
    gains = np.clip(reference, 0.0, None)
    depth = min(top, gains.shape[1])
    discount = 1.0 / np.log2(np.arange(2, depth + 2))
    ideal = (-np.sort(-gains, axis=1)[:, :depth] * discount).sum(axis=1)
    ranked = np.argsort(-candidate, axis=1, kind="stable")[:, :depth]
    dcg = (np.take_along_axis(gains, ranked, axis=1) * discount).sum(axis=1)
    judged = ideal > 0
    return float((dcg[judged] / ideal[judged]).mean()) if judged.any() else 1.0


def decide(seconds: dict[str, float], ndcg: dict[str, float]) -> tuple[str, str, dict[str, str]]:
    """The rule: (the backend, the reason, a verdict per backend)."""
    reference = seconds[REFERENCE]
    verdicts = {REFERENCE: "the fp32 reference"}
    within = [b for b in seconds if b != REFERENCE and ndcg[b] >= 1 - NDCG_BOUND]
    for b in seconds:
        if b != REFERENCE and b not in within:
            verdicts[b] = f"outside the accuracy bound: nDCG@{TOP} {ndcg[b]:.4f} < {1 - NDCG_BOUND:g}"
    fast = [b for b in within if seconds[b] * MARGIN <= reference]
    for b in within:
        if b not in fast:
            verdicts[b] = f"{reference / seconds[b]:.2f}x torch: short of the {MARGIN:g}x margin over torch"
    if not fast:
        return REFERENCE, (f"torch: no backend within the accuracy bound is {MARGIN:g}x faster than torch "
                           f"({_summary(seconds, ndcg)})"), verdicts
    winner = min(fast, key=lambda b: seconds[b])
    for b in fast:
        verdicts[b] = f"{reference / seconds[b]:.2f}x torch: " + (
            "the fastest within the bound" if b == winner else f"slower than {winner}")
    reason = (f"{winner}: {reference / seconds[winner]:.2f}x torch at nDCG@{TOP} {ndcg[winner]:.4f} against torch's "
              f"ranking, the fastest within the bound ({_summary(seconds, ndcg)})")
    return winner, reason, verdicts


def _summary(seconds: dict[str, float], ndcg: dict[str, float]) -> str:
    return "; ".join(f"{b} {seconds[b]:.2f}s nDCG@{TOP} {ndcg[b]:.4f}" for b in seconds)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(cache_file: Path) -> dict[str, Any]:
    try:
        return json.loads(cache_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cache_file}: not the JSON backend auto writes ({exc}); delete it to measure again") from exc


def _write(cache_file: Path, choices: dict[str, Any]) -> None:
    write_atomically(cache_file, (json.dumps(choices, indent=1, sort_keys=True) + "\n").encode())


@contextmanager
def _locked(cache_file: Path) -> Iterator[None]:
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    with open(cache_file.with_suffix(".lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
