"""A generated BEIR collection on which BM25's term-frequency saturation decides the ranking.

Each query has two rare terms and one common term. Its one relevant document repeats the two rare terms; three
distractors hold each query term once. With the default k1 = 0.9 the repeated rare terms win; with k1 near 0 (term
frequency ignored) the distractors win on the extra common term. So a BM25 broken on purpose (k1 0.05, b 0) loses
nDCG on every query, a difference no paired test can mistake for noise.

Six borderline queries sit on the knife's edge instead: their relevant document repeats one rare term three times
and its length varies, against one distractor. At k1 0.9 the two shortest win (rank 1, the others rank 2), at
k1 1.0 the four shortest: a small parameter change that really moves two questions, which a paired test must call
noise. With k1 0.05 and b 0 all six rank 2.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

N_QUERIES = 60
N_COMMON = 10
DISTRACTORS = 3
BORDERLINE_LENGTHS = (16, 22, 28, 31, 46, 58)  # filler words in each borderline relevant document
FILLER = [f"filler{chr(97 + i)}{chr(97 + j)}" for i in range(20) for j in range(20)]


def word(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(4))


def write_collection(directory: Path, seed: int = 0) -> Path:
    """corpus.jsonl, queries.jsonl and qrels.tsv under `directory`; returns it."""
    rng = random.Random(seed)
    common = [f"common{word(rng)}" for _ in range(N_COMMON)]
    docs, queries, qrels = [], [], []
    for i in range(N_QUERIES):
        rare = [f"rare{word(rng)}", f"rare{word(rng)}"]
        topic = common[i % N_COMMON]
        queries.append({"_id": f"q{i:02d}", "text": f"{rare[0]} {rare[1]} {topic}"})
        docs.append({"_id": f"d{i:02d}r", "title": "", "text": " ".join(rare * 6 + rng.sample(FILLER, 30))})
        qrels.append((f"q{i:02d}", f"d{i:02d}r", 1))
        for j in range(DISTRACTORS):
            docs.append({"_id": f"d{i:02d}x{j}", "title": "",
                         "text": " ".join([*rare, topic, *rng.sample(FILLER, 40)])})
    for i, length in enumerate(BORDERLINE_LENGTHS):
        rare = [f"rare{word(rng)}", f"rare{word(rng)}"]
        qid = f"b{i:02d}"
        queries.append({"_id": qid, "text": f"{rare[0]} {rare[1]} {common[i % N_COMMON]}"})
        relevant = [rare[0]] * 3 + [rare[1]] + rng.sample(FILLER, length)
        distractor = [*rare, common[i % N_COMMON], *rng.sample(FILLER, 40)]
        docs += [{"_id": f"{qid}r", "title": "", "text": " ".join(relevant)},
                 {"_id": f"{qid}x", "title": "", "text": " ".join(distractor)}]
        qrels.append((qid, f"{qid}r", 1))
    rng.shuffle(docs)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (directory / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (directory / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels), encoding="utf-8")
    return directory
