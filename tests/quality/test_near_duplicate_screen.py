"""``near_duplicate_pairs`` screens its candidates in bulk (owners, earlier bands, an upper bound
of the Jaccard from shingle counts and bitmaps) before the exact Jaccard: the same pairs,
similarities and order as checking every candidate (``_near_duplicate_pairs_loop``), with the
bound never below a pair's Jaccard."""

from __future__ import annotations

import random

import numpy as np
import pytest

from preflab.quality import telemetry
from preflab.quality.telemetry import jaccard, near_duplicate_pairs, shingles

WORDS = "the answer is correct because it checks every case and returns early on error".split()


def _texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Copies edited once or twice (a Jaccard near 0.8 on either side), stock phrases, short
    texts (tiny shingle sets), one owner's copies."""
    rng = random.Random(seed)
    base = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 25))) for _ in range(n)]
    texts, owners = [], []
    for k in range(4 * n):
        text = base[rng.randrange(n)]
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            text = text.replace(rng.choice(WORDS), rng.choice(WORDS + ["x", "Ünïcode"]), 1)
        if rng.random() < 0.1:
            text = rng.choice(["Better.", "B is better", "", "ok"])
        texts.append(text)
        owners.append(f"r{k % 5}")
    return texts, owners


@pytest.mark.parametrize("chunk", [7, 65_536])
@pytest.mark.parametrize("threshold", [0.8, 0.5, 1.0])
def test_same_pairs_as_checking_every_candidate(chunk, threshold, monkeypatch):
    monkeypatch.setattr(telemetry, "PAIR_CHUNK", chunk)  # 7: many chunks, a bucket split
    texts, owners = _texts(150, seed=int(threshold * 10))
    found = near_duplicate_pairs(texts, owners, threshold)
    want = telemetry._near_duplicate_pairs_loop(texts, owners, threshold)
    assert found == want
    assert len(found) > 20
    assert all(sim == jaccard(texts[i], texts[j]) for i, j, sim in found)
    if threshold < 1.0:
        assert any(sim < 1.0 for *_, sim in found)


def test_owners_of_other_types_take_the_loop():
    texts, owners = _texts(40, seed=2)
    numbered = [int(o[1:]) for o in owners]
    assert near_duplicate_pairs(texts, numbered) == near_duplicate_pairs(texts, owners)


def test_bound_is_never_below_the_jaccard():
    texts, _ = _texts(120, seed=3)
    _, sizes, bitmaps = telemetry._sign(texts, 5, 64, 1, 256, True)
    assert sizes is not None and bitmaps is not None
    assert sizes.tolist() == [len(shingles(t)) for t in texts]
    words = bitmaps.view(np.uint64)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, len(texts), (2, 4000))
    sims = np.array([jaccard(texts[x], texts[y]) for x, y in zip(i, j, strict=True)])
    for threshold in sorted(set(sims.tolist()))[::7] + [0.8]:
        reach = telemetry._may_reach(sizes[i], sizes[j], words[i], words[j], threshold)
        assert reach[sims >= threshold].all()
        if threshold == 0.8:
            assert (~reach).sum() > 0.5 * (sims < threshold).sum()  # a screen that screens
