"""The near-duplicate rationale search in bounded memory (``quality/telemetry.py``): the shingle
hash cache cleared when full, the LSH buckets band by band; the same signatures and pairs as
the whole-project buckets."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from preflab.quality import telemetry
from preflab.quality.telemetry import jaccard, minhash_signatures, near_duplicate_pairs

WORDS = "the answer is correct because it checks every case and returns early on error".split()


def _texts(n: int) -> tuple[list[str], list[str]]:
    rng = random.Random(4)
    base = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(6, 20))) for _ in range(n)]
    texts, owners = [], []
    for k in range(3 * n):
        text = base[rng.randrange(n)]
        if rng.random() < 0.5:  # an edited copy
            text = text.replace(rng.choice(WORDS), rng.choice(WORDS), 1)
        texts.append(text)
        owners.append(f"r{k % 7}")
    return texts, owners


def _reference(texts, owners, min_jaccard=0.8, k=5, num_perm=64):
    """The search as it was: every band's buckets in one dict."""
    sigs = minhash_signatures(texts, k, num_perm)
    bands, rows = 16, num_perm // 16
    buckets = defaultdict(list)
    width = rows * sigs.dtype.itemsize
    for i, s in enumerate(sigs):
        raw = s.tobytes()
        for b in range(bands):
            buckets[(b, raw[b * width : (b + 1) * width])].append(i)
    seen, out = set(), []
    for members in buckets.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                i, j = members[x], members[y]
                if (i, j) in seen or owners[i] == owners[j]:
                    continue
                seen.add((i, j))
                sim = jaccard(texts[i], texts[j], k)
                if sim >= min_jaccard:
                    out.append((i, j, sim))
    return sorted(out)


def test_band_by_band_finds_the_same_pairs():
    texts, owners = _texts(120)
    found = near_duplicate_pairs(texts, owners)
    assert found  # the generated copies are found
    assert found == _reference(texts, owners)
    assert near_duplicate_pairs([], []) == []


def test_a_cleared_shingle_cache_gives_the_same_signatures(monkeypatch):
    texts, _ = _texts(80)
    whole = minhash_signatures(texts, block=16)
    monkeypatch.setattr(telemetry, "SHINGLE_CACHE", 10)
    assert np.array_equal(minhash_signatures(texts, block=16), whole)
