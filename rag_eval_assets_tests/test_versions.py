"""The version tuple and its config_hash."""

from __future__ import annotations

import pytest

from rag_eval_assets.runs.versions import VersionTuple


def test_version_tuple_hash_is_canonical_and_sensitive():
    a = VersionTuple().with_part("dataset", evalset_sha256="aa", corpus_sha256="bb").with_part("index", chunk_size_chars=800)
    b = VersionTuple().with_part("index", chunk_size_chars=800).with_part("dataset", corpus_sha256="bb", evalset_sha256="aa")
    assert a.config_hash == b.config_hash and len(a.config_hash) == 64
    assert a.with_part("index", chunk_size_chars=801).config_hash != a.config_hash
    assert VersionTuple.from_dict(a.as_dict()) == a
    with pytest.raises(ValueError, match="unknown version part"):
        a.with_part("colour", x=1)
