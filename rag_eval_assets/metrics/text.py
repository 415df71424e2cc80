"""Seed 004's end-to-end text metrics: token F1, exact match, ROUGE-L and embedding semantic similarity.

Both texts are normalised first (`normalise.strip_symbols`: NFKC, casefold, ё -> е, punctuation and symbols to
spaces, spaces collapsed). Tokens are the whitespace-separated words, except that every Han, Hiragana or Katakana
character is a token of its own: Chinese and Japanese put no spaces between words, so a whole sentence would
otherwise be one token.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd
from rapidfuzz.distance import LCSseq

from rag_eval_assets.metrics.normalise import strip_symbols
from rag_eval_assets.retrieval.encoders import Encoder

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
SEMANTIC = "semantic_similarity"


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(strip_symbols(text))


def token_f1(pred: str, ref: str) -> float:
    """SQuAD-style: overlap = multiset intersection of the token lists, P = overlap/|pred|, R = overlap/|ref|,
    F1 = 2PR/(P+R). Two empty texts agree (1.0); one empty text scores 0."""
    return _token_f1(tokens(pred), tokens(ref))


def exact_match(pred: str, ref: str) -> float:
    """1.0 when the token lists are equal (so case, punctuation and spacing do not matter), else 0.0."""
    return float(tokens(pred) == tokens(ref))


def rouge_l(pred: str, ref: str) -> float:
    """ROUGE-L F with beta = 1 over tokens: LCS = longest common subsequence length, P = LCS/|pred|,
    R = LCS/|ref|, F = 2PR/(P+R). Two empty texts agree (1.0); one empty text scores 0."""
    return _rouge_l(tokens(pred), tokens(ref))


def _token_f1(p: list[str], r: list[str]) -> float:
    if not p or not r:
        return float(p == r)
    return _f(sum((Counter(p) & Counter(r)).values()), len(p), len(r))


def _rouge_l(p: list[str], r: list[str]) -> float:
    if not p or not r:
        return float(p == r)
    return _f(LCSseq.similarity(p, r), len(p), len(r))


def _f(common: int, n_pred: int, n_ref: int) -> float:
    if common == 0:
        return 0.0
    precision, recall = common / n_pred, common / n_ref
    return 2 * precision * recall / (precision + recall)


def semantic_similarity(preds: Sequence[str], refs: Sequence[str], encoder: Encoder) -> np.ndarray:
    """Cosine of the encoder's L2-normalised embeddings of the normalised texts, both encoded as passages (seed 004:
    both texts get the `passage:` prefix; the encoder adds it when its model uses prefixes). Not clipped: a cosine
    can be below 0 although seed 004 describes the range as [0, 1]. A pair with an empty normalised text is not
    encoded: 1.0 when both are empty, 0.0 when one is."""
    p = [strip_symbols(t) for t in preds]
    r = [strip_symbols(t) for t in refs]
    out = np.array([float(a == b) for a, b in zip(p, r)])
    both = [i for i, (a, b) in enumerate(zip(p, r)) if a and b]
    if both:
        ep = encoder.encode([p[i] for i in both], "passage")
        er = encoder.encode([r[i] for i in both], "passage")
        out[both] = np.einsum("ij,ij->i", ep, er)
    return out


def text_metrics(preds: Sequence[str], refs: Sequence[str], encoder: Encoder | None = None) -> pd.DataFrame:
    """One row per (pred, ref) pair, in input order: token_f1, exact_match, rouge_l, and semantic_similarity when an
    encoder is given."""
    if len(preds) != len(refs):
        raise ValueError(f"{len(preds)} predictions but {len(refs)} references")
    pairs = [(tokens(p), tokens(r)) for p, r in zip(preds, refs)]
    table = pd.DataFrame(
        {
            "token_f1": [_token_f1(p, r) for p, r in pairs],
            "exact_match": [float(p == r) for p, r in pairs],
            "rouge_l": [_rouge_l(p, r) for p, r in pairs],
        },
        dtype=float,
    )
    if encoder is not None:
        table[SEMANTIC] = semantic_similarity(preds, refs, encoder)
    return table
