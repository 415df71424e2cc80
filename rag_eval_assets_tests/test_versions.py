"""The version tuple and its config_hash."""

from __future__ import annotations

import pytest

from rag_eval_assets.runs.versions import VersionTuple


def test_version_tuple_hash_is_canonical_and_sensitive():
    a = VersionTuple().with_part("dataset", evalset_sha256="aa", corpus_sha256="bb").with_part("index", chunk_size_chars=800)
    b = VersionTuple().with_part("index", chunk_size_chars=800).with_part("dataset", corpus_sha256="bb", evalset_sha256="aa")
    assert a.config_hash == b.config_hash and len(a.config_hash) == 64
    assert a.with_part("index", chunk_size_chars=801).config_hash != a.config_hash
    with pytest.raises(ValueError, match="unknown version part"):
        a.with_part("colour", x=1)


def test_run_versions_are_a_pure_function_of_settings_and_input_hashes(tmp_path):
    from rag_eval_assets.configured_run import retriever_params, run_versions
    from rag_eval_assets.settings import load_settings
    from rag_eval_assets_tests.sample_config import write_sample_config

    base = load_settings(write_sample_config(tmp_path, "retrievers: [bm25, dense, hybrid]\n"))
    a, b = run_versions(base, "a" * 64, "b" * 64), run_versions(base, "a" * 64, "b" * 64)
    assert a == b and a.config_hash == b.config_hash
    assert a.dataset == {"evalset_sha256": "a" * 64, "eval_set_version": f"sample_eval_set@{'a' * 12}",
                         "corpus_sha256": "b" * 64, "corpus_id": "sample"}
    assert a.retriever["retrievers"]["dense"]["model"] == "all-MiniLM-L6-v2"
    assert run_versions(base, "c" * 64, "b" * 64).config_hash != a.config_hash
    k1 = load_settings(write_sample_config(tmp_path, "retrievers: [bm25, dense, hybrid]\n"
                                               "retrieval: {bm25: {k1: 1.2}}\n"))
    assert run_versions(k1, "a" * 64, "b" * 64).config_hash != a.config_hash
    # k1 is a parameter of bm25 and hybrid, not of dense.
    changed = {n for n in ("bm25", "dense", "hybrid") if retriever_params(k1, n) != retriever_params(base, n)}
    assert changed == {"bm25", "hybrid"}


def test_every_asset_has_a_code_version_that_takes_in_the_settings_it_reads(tmp_path):
    from rag_eval_assets.definitions import build_defs
    from rag_eval_assets_tests.sample_config import write_sample_config

    def versions(extra: str) -> dict[str, str]:
        graph = build_defs(write_sample_config(tmp_path, extra)).resolve_asset_graph()
        return {key.to_user_string(): graph.get(key).code_version for key in graph.get_all_asset_keys()}

    base = versions("k_values: [1, 10]\n")
    assert all(base.values())
    changed = versions("k_values: [1, 3, 10]\n")
    assert {name for name in base if base[name] != changed[name]} == {
        "retrieval_metrics_per_query", "evaluation_run", "run_comparison"}
    chunking = versions("k_values: [1, 10]\nchunking: {chunk_size_chars: 500}\n")
    assert {name for name in base if base[name] != chunking[name]} == {
        "chunks", "retrieval_metrics", "answer_metrics", "evaluation_run", "run_comparison"}
    # A token in a URL changes nothing that is computed, and never enters a code version, even hashed.
    def with_token(token: str) -> dict[str, str]:
        return versions(f"k_values: [1, 10]\nllm: {{base_url: 'http://user:{token}@127.0.0.1:9/v1', model: m}}\n")

    assert with_token("s3cret") == with_token("other-s3cret") != base
