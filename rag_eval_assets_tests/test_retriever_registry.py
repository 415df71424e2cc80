"""Retrievers as a registry: named variants in rag_eval.yaml, indexes only for what the variants use, and a kind
added from outside the library (this file) that runs through the pipeline."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Annotated, ClassVar

import dagster as dg
import numpy as np
import pytest
from pydantic import BaseModel, StrictInt

from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.errors import InputError
from rag_eval_assets.retrieval.topk import Hit
from rag_eval_assets.retrieval.registry import KINDS, BuiltIndexes, IndexNeed, Variant, needs_of, register
from rag_eval_assets.settings import load_settings
from rag_eval_assets.settings_base import Section, at_least
from rag_eval_assets_tests.stored_tables import stored_table
from rag_eval_assets_tests.sample_config import REPO, write_sample_config

VARIANTS = (
    "retrievers:\n"
    "  bm25: {kind: bm25}\n"
    "  bm25_tuned: {kind: bm25, k1: 1.2, b: 0.75}\n"
    "  minilm: {kind: dense, model: all-MiniLM-L6-v2}\n"
    "  use: {kind: dense, model: use-multilingual-v3}\n"
    "  hybrid_use: {kind: hybrid, of: [bm25, use], method: convex, alpha: 0.3}\n"
)


def test_named_variants_resolve_with_their_parameters(tmp_path):
    s = load_settings(write_sample_config(tmp_path, VARIANTS))
    assert s.retrievers == ("bm25", "bm25_tuned", "minilm", "use", "hybrid_use")
    assert (s.variants["bm25"].params.k1, s.variants["bm25"].params.b) == (0.9, 0.4)  # retrieval.bm25's defaults
    assert (s.variants["bm25_tuned"].params.k1, s.variants["bm25_tuned"].params.b) == (1.2, 0.75)
    hybrid = s.variants["hybrid_use"]
    assert [p.name for p in hybrid.parts] == ["bm25", "use"]
    assert hybrid.version()["of"][1] == {"name": "use", "kind": "dense", "model": "use-multilingual-v3", "device": "auto",
                                         "backend": "auto"}


def test_the_short_list_keeps_its_meaning(tmp_path):
    s = load_settings(write_sample_config(tmp_path, "retrievers: [bm25, hybrid]\nretrieval: {bm25: {k1: 1.5}}\n"))
    assert s.retrievers == ("bm25", "hybrid")
    assert s.variants["bm25"].params.k1 == 1.5
    assert [(p.name, p.kind) for p in s.variants["hybrid"].parts] == [("bm25", "bm25"), ("dense", "dense")]


def test_variant_errors_name_the_dotted_key_and_the_choices(tmp_path):
    bad = write_sample_config(tmp_path, (
        "retrievers:\n"
        "  tuned: {kind: bm25, b: 1.5, k: 3}\n"
        "  odd: {kind: splade}\n"
        "  mix: {kind: hybrid, of: [tuned, nowhere], method: max}\n"
        "  'a/b': {kind: bm25}\n"
    ))
    with pytest.raises(InputError) as info:
        load_settings(bad)
    found = {(p.field, p.message) for p in info.value.problems}
    assert ("retrievers.tuned.b", "must be between 0 and 1, got 1.5") in found
    assert ("retrievers.tuned.k", "unknown key; valid keys: k1, b, variant") in found
    assert ("retrievers.odd.kind", "'splade' is not one of bm25, dense, hybrid, http") in found
    assert ("retrievers.mix.method", "'max' is not one of rrf, convex") in found
    assert any(f == "retrievers.a/b" for f, _ in found)


def test_two_bm25_settings_and_two_models_compare_in_one_run(tmp_path):
    config = write_sample_config(tmp_path, VARIANTS + "k_values: [1, 5]\nanswering: {k_values: [5]}\n")
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
        assert all(s.result.success for s in steps), [s.job for s in steps if not s.result.success]
        built = {e.materialization.asset_key.to_user_string(): e.materialization
                 for s in steps for e in s.result.get_asset_materialization_events()}
    # One bm25 index shared by both BM25 variants, one dense index per model.
    assert {k for k in built if "index" in k} == {"bm25_index", "dense_index/all-MiniLM-L6-v2",
                                                 "dense_index/use-multilingual-v3"}
    assets = tmp_path / "store" / "assets"
    plain = stored_table(assets, "retrieval_results/retriever=bm25")
    tuned = stored_table(assets, "retrieval_results/retriever=bm25_tuned")
    assert not plain["score"].equals(tuned["score"])  # k1 and b really differ
    table = stored_table(assets, "retrieval_metrics")
    assert set(table["retriever"]) == {"bm25", "bm25_tuned", "minilm", "use", "hybrid_use"}
    run_dir = next((tmp_path / "store" / "runs").iterdir())
    recorded = json.dumps(json.loads((run_dir / "config.json").read_text())["settings"]["variants"])
    assert '"k1": 1.2' in recorded and "use-multilingual-v3" in recorded


def test_a_bm25_only_configuration_never_imports_torch(tmp_path):
    """In a fresh interpreter: the whole pipeline runs, and neither torch nor an encoder library is imported."""
    script = (
        "import sys, dagster as dg\n"
        "from pathlib import Path\n"
        "from rag_eval_assets.defs.jobs import run_pipeline\n"
        "from rag_eval_assets.definitions import build_defs\n"
        "from rag_eval_assets.settings import load_settings\n"
        "from rag_eval_assets_tests.sample_config import write_sample_config\n"
        "tmp = Path(sys.argv[1])\n"
        "(tmp / 'home').mkdir()\n"
        "config = write_sample_config(tmp, 'retrievers: [bm25]\\nk_values: [1, 5]\\nanswering: {k_values: [5]}\\n')\n"
        "with dg.instance_for_test(temp_dir=str(tmp / 'home')) as instance:\n"
        "    steps = list(run_pipeline(build_defs(config), load_settings(config), instance))\n"
        "print(all(s.result.success for s in steps), sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'sentence_transformers', 'transformers'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True []"


class _LuckyParams(Section):
    seed: Annotated[StrictInt, at_least(0)] = 0


class _LuckyKind:
    """A kind from outside the library: seeded random scores over every chunk (a floor any real retriever beats)."""

    name: ClassVar[str] = "lucky"
    Params: ClassVar[type[BaseModel]] = _LuckyParams
    own_answers: ClassVar[bool] = False
    role: ClassVar[str | None] = None

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return []

    def build(self, variant: Variant, indexes: BuiltIndexes):
        n_chunks, seed = len(indexes.chunks), variant.params.seed

        class Lucky:
            def search_batch(self, texts, depth, allowed=None):
                scores = np.random.default_rng(seed).random((len(texts), n_chunks))
                return [[Hit(int(r), float(s[r]), math.nan, math.nan) for r in np.argsort(-s, kind="stable")[:depth]]
                        for s in scores]

        return Lucky()


@pytest.fixture
def lucky_kind():
    register(_LuckyKind())
    yield
    KINDS.pop("lucky")


def test_a_kind_registered_from_outside_runs_through_the_pipeline(tmp_path, lucky_kind):
    config = write_sample_config(tmp_path, "retrievers:\n  bm25: {kind: bm25}\n  lucky: {kind: lucky, seed: 3}\n"
                                 "k_values: [1, 5]\nanswering: {k_values: [5]}\n")
    (tmp_path / "bad").mkdir()
    with pytest.raises(InputError, match="retrievers.lucky.seed"):
        load_settings(write_sample_config(tmp_path / "bad", "retrievers:\n  lucky: {kind: lucky, seed: -1}\n"))
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        steps = list(run_pipeline(build_defs(config), load_settings(config), instance))
    assert all(s.result.success for s in steps), [s.job for s in steps if not s.result.success]
    assets = tmp_path / "store" / "assets"
    lucky = stored_table(assets, "retrieval_results/retriever=lucky")
    assert lucky.groupby("query_id").size().eq(5).all()
    table = stored_table(assets, "retrieval_metrics")
    hits = table[(table.slice == "all") & (table.metric == "hit@k") & (table.k == 5)].set_index("retriever")["value"]
    assert hits["bm25"] > hits["lucky"]  # chance loses to BM25 on the sample
    run_dir = next((tmp_path / "store" / "runs").iterdir())
    variants = json.loads((run_dir / "config.json").read_text())["settings"]["variants"]
    assert variants["lucky"] == {"name": "lucky", "kind": "lucky", "seed": 3}


def test_dense_settings_device_and_backend_name_the_index(tmp_path):
    s = load_settings(write_sample_config(tmp_path, (
        "retrievers:\n"
        "  minilm: {kind: dense}\n"
        "  minilm_ov: {kind: dense, backend: openvino, device: cpu}\n"
        "  minilm_torch: {kind: dense, backend: torch}\n"
    )))
    needs = {n.key for n in needs_of(s.variants, s.corpus.language)}
    # Another backend's vectors are another index; the model's plain name is auto's (the default).
    assert needs == {"all-MiniLM-L6-v2", "all-MiniLM-L6-v2__openvino", "all-MiniLM-L6-v2__torch"}
    assert (s.variants["minilm"].params.device, s.variants["minilm"].params.backend) == ("auto", "auto")
    (tmp_path / "bad").mkdir()
    with pytest.raises(InputError) as info:
        load_settings(write_sample_config(tmp_path / "bad", "retrievers:\n  x: {kind: dense, device: gpu, "
                                          "backend: tensorrt}\n"))
    found = {(p.field, p.message) for p in info.value.problems}
    assert ("retrievers.x.device", "'gpu' is not one of auto, cpu, cuda, cuda:N, mps") in found
    assert ("retrievers.x.backend", "'tensorrt' is not one of auto, torch, onnx, onnx-int8, openvino") in found


def test_a_variant_version_never_carries_a_credential(tmp_path):
    s = load_settings(write_sample_config(tmp_path, (
        "retrievers:\n"
        "  svc: {kind: http, base_url: 'https://user:s3cret-pass@rag.example/t/?token=s3cret-token'}\n"
    )))
    written = json.dumps(s.variants["svc"].version())
    assert "s3cret" not in written and "rag.example" in written
