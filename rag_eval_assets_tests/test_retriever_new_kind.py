"""A retriever kind with an index family of its own, defined and registered in this file only: TF-IDF cosine over
sparse vectors (by hand, with numpy and scipy). It runs through the whole pipeline next to bm25 and inside a hybrid,
its index an asset of its own stored as Parquet, and its scores equal scikit-learn's TF-IDF cosine."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import ClassVar

import dagster as dg
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from pydantic import BaseModel
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from rag_eval_assets.defs.jobs import run_pipeline
from rag_eval_assets.defs.storage.table_store import TableStore
from rag_eval_assets.definitions import build_defs
from rag_eval_assets.retrieval.index_families import BuiltIndex, IndexEnv, IndexFamily, IndexNeed
from rag_eval_assets.retrieval.registry import KINDS, BuiltIndexes, Variant, register
from rag_eval_assets.retrieval.topk import Ranking, mask_disallowed, role_hits, top_k_block
from rag_eval_assets.runs.store import read_run
from rag_eval_assets.settings import load_settings
from rag_eval_assets.settings_base import Section
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.stored_tables import stored_table

TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern, after lowercasing


def _counts(texts: Sequence[str], column: dict[str, int]) -> sp.csr_matrix:
    rows, cols = [], []
    for row, text in enumerate(texts):
        for term in TOKEN.findall(text.lower()):
            if term in column:
                rows.append(row)
                cols.append(column[term])
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(texts), len(column)))


def _unit_rows(matrix: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    return sp.diags(1 / np.where(norms > 0, norms, 1)) @ matrix


class TfIdfIndex:
    """Raw term counts of every chunk (chunks x terms); smoothed idf, ln((1 + n) / (1 + df)) + 1, and unit vectors
    are derived from them."""

    def __init__(self, terms: list[str], counts: sp.csr_matrix):
        self.terms, self.counts = terms, counts.tocsr()
        self.column = {term: i for i, term in enumerate(terms)}
        df = np.bincount(self.counts.indices, minlength=len(terms))
        self.idf = np.log((1 + counts.shape[0]) / (1 + df)) + 1
        self.vectors = _unit_rows(self.counts @ sp.diags(self.idf))

    @classmethod
    def build(cls, texts: Sequence[str]) -> TfIdfIndex:
        terms = sorted({term for text in texts for term in TOKEN.findall(text.lower())})
        return cls(terms, _counts(texts, {term: i for i, term in enumerate(terms)}))

    def rankings(self, texts: Sequence[str], depth: int,
                 allowed: Sequence[frozenset[int] | None] | None = None) -> list[Ranking]:
        queries = _unit_rows(_counts(texts, self.column) @ sp.diags(self.idf))
        block = (queries @ self.vectors.T).toarray()
        if allowed is not None:
            mask_disallowed(block, allowed)
        return top_k_block(block, depth, floor=0.0)  # chunks sharing no term with the query are not retrieved


def _to_table(index: TfIdfIndex, chunk_ids: pd.Series) -> pd.DataFrame:
    coo = index.counts.tocoo()
    return pd.DataFrame({"chunk_id": np.asarray(chunk_ids)[coo.row],
                         "term": np.asarray(index.terms, dtype=object)[coo.col], "count": coo.data.astype(np.int32)})


def _from_table(table: pd.DataFrame, need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> TfIdfIndex:
    terms, cols = np.unique(table["term"].to_numpy(dtype=object), return_inverse=True)
    rows = pd.Index(chunks["chunk_id"]).get_indexer(table["chunk_id"])
    assert (rows >= 0).all(), "the tfidf index names chunks that are not in the chunk table"
    counts = sp.csr_matrix((table["count"].to_numpy(np.float64), (rows, cols)), shape=(len(chunks), len(terms)))
    return TfIdfIndex([str(t) for t in terms], counts)


def _build(need: IndexNeed, chunks: pd.DataFrame, env: IndexEnv) -> BuiltIndex:
    index = TfIdfIndex.build(chunks["text"].tolist())
    return BuiltIndex(index, {"tfidf": "smooth-idf-l2"}, {"terms": len(index.terms)})


TFIDF_INDEX = IndexFamily(
    name="tfidf_index",
    description="Term counts of every chunk under scikit-learn's default tokenizer; idf and norms apply when loaded.",
    build=_build,
    to_table=_to_table,
    from_table=_from_table,
    version=lambda need: {"tfidf": "smooth-idf-l2"},
)


class _TfIdfSettings(Section):
    pass


class TfIdfRetriever:
    def __init__(self, index: TfIdfIndex):
        self.index = index

    def rankings(self, texts, depth, allowed=None) -> list[Ranking]:
        return self.index.rankings(texts, depth, allowed)

    def search_batch(self, texts, depth, allowed=None):
        return role_hits(self.rankings(texts, depth, allowed), "lexical")


class _TfIdfKind:
    name: ClassVar[str] = "tfidf"
    Params: ClassVar[type[BaseModel]] = _TfIdfSettings
    own_answers: ClassVar[bool] = False
    role: ClassVar[str | None] = "lexical"

    def problems(self, params: BaseModel) -> list[tuple[str, str]]:
        return []

    def needs(self, variant: Variant, language: str) -> list[IndexNeed]:
        return [IndexNeed(TFIDF_INDEX, language, None)]

    def build(self, variant: Variant, indexes: BuiltIndexes) -> TfIdfRetriever:
        (need,) = self.needs(variant, indexes.language)
        return TfIdfRetriever(indexes.get(need))


@pytest.fixture
def tfidf_kind():
    register(_TfIdfKind())
    yield
    KINDS.pop("tfidf")


CONFIG = (
    "retrievers:\n"
    "  bm25: {kind: bm25}\n"
    "  tfidf: {kind: tfidf}\n"
    "  tfidf_dense: {kind: hybrid, of: [tfidf, dense]}\n"
    "k_values: [1, 5]\n"
    "answering: {k_values: [5]}\n"
)


@pytest.fixture
def pipeline(tmp_path, tfidf_kind):
    config = write_sample_config(tmp_path, CONFIG)
    defs = build_defs(config)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        steps = list(run_pipeline(defs, load_settings(config), instance))
    assert all(s.result.success for s in steps), [s.job for s in steps if not s.result.success]
    return tmp_path, defs, steps


def test_a_kind_with_its_own_index_runs_through_the_pipeline(pipeline):
    tmp_path, defs, steps = pipeline
    assets = tmp_path / "store" / "assets"
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("tfidf_index") in graph.get_all_asset_keys()
    assert dg.AssetKey("tfidf_index") in graph.get(dg.AssetKey("retrieval_results")).parent_keys
    built = {e.materialization.asset_key.to_user_string(): e.materialization
             for s in steps for e in s.result.get_asset_materialization_events()}
    assert {k for k in built if "index" in k} == {"bm25_index", "tfidf_index", "dense_index/all-MiniLM-L6-v2"}

    # Stored as Parquet, one row per (chunk, term) with the count scikit-learn's tokenizer gives.
    chunks = stored_table(assets, "chunks")
    path = TableStore(assets).locate("tfidf_index")
    assert path is not None and path.name.endswith(".parquet")
    stored = stored_table(assets, "tfidf_index")
    counter = CountVectorizer()
    expected_counts = counter.fit_transform(chunks["text"]).tocoo()
    vocabulary = counter.get_feature_names_out()
    assert built["tfidf_index"].metadata["terms"].value == len(vocabulary)
    expected = pd.DataFrame({"chunk_id": chunks["chunk_id"].to_numpy()[expected_counts.row],
                             "term": vocabulary[expected_counts.col], "count": expected_counts.data})
    key = ["chunk_id", "term"]
    pd.testing.assert_frame_equal(stored.sort_values(key).reset_index(drop=True)[["chunk_id", "term", "count"]],
                                  expected.sort_values(key).reset_index(drop=True), check_dtype=False)

    # Its results are scikit-learn's TF-IDF cosine, best first, chunks sharing no term left out.
    evalset = stored_table(assets, "evalset")
    vectorizer = TfidfVectorizer().fit(chunks["text"])
    similarity = (vectorizer.transform(evalset["question"]) @ vectorizer.transform(chunks["text"]).T).toarray()
    results = stored_table(assets, "retrieval_results/retriever=tfidf")
    row_of = {chunk_id: i for i, chunk_id in enumerate(chunks["chunk_id"])}
    checked = 0
    for q, query_id in enumerate(evalset["id"]):
        got = results[results["query_id"] == query_id].sort_values("rank")
        want = np.sort(similarity[q][similarity[q] > 0])[::-1][:5]
        assert got["score"].to_numpy() == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert [similarity[q][row_of[c]] for c in got["chunk_id"]] == pytest.approx(list(got["score"]), rel=1e-9)
        checked += len(got)
    assert checked > len(evalset)  # most questions retrieve several chunks
    # Its scores fill the column of its role, alone and in a fusion with dense.
    assert (results["score_lexical"] == results["score"]).all() and results["score_semantic"].isna().all()
    fused = stored_table(assets, "retrieval_results/retriever=tfidf_dense")
    lexical = fused.dropna(subset=["score_lexical"])
    assert len(lexical) and fused["score_semantic"].notna().any()
    for r in lexical.itertuples(index=False):
        q = int(np.flatnonzero(evalset["id"].to_numpy() == r.query_id)[0])
        assert r.score_lexical == pytest.approx(similarity[q][row_of[r.chunk_id]], rel=1e-9)

    # Its metrics are in the run, the same metrics bm25 has.
    run = read_run(next((tmp_path / "store" / "runs").iterdir()))
    aggregate = run.aggregate_frame()
    metrics = {name: set(aggregate.loc[aggregate["retriever"] == name, "metric"]) for name in ("bm25", "tfidf")}
    assert metrics["tfidf"] and metrics["tfidf"] == metrics["bm25"]
    hit = aggregate[(aggregate.retriever == "tfidf") & (aggregate.metric == "hit@k") & (aggregate.k == 5)
                    & (aggregate.slice == "all")]["value"]
    assert len(hit) == 1 and 0 < hit.iloc[0] <= 1 and not math.isnan(hit.iloc[0])
    assert set(run.per_query_frame()["retriever"]) >= {"bm25", "tfidf", "tfidf_dense"}
