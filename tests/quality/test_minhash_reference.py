"""MinHash signatures against their definition: for each permutation ``j``, the minimum over a
text's set of character k-shingles (:func:`shingles`) of ``(h(s) * a_j + b_j) mod 2**64``, in
Python integers. :func:`minhash_signatures` hashes each distinct shingle once, takes the
minima of a block of texts in one array operation and keeps a bounded hash cache; it must
give exactly these values whatever the block, the cache bound or the text (short, empty,
repeated shingles, characters outside the BMP, whitespace to normalize)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from preflab.quality import telemetry
from preflab.quality.telemetry import _salts, _shingle_hash, minhash_signatures, shingles

MASK = (1 << 64) - 1


def by_definition(text: str, k: int, num_perm: int, seed: int = 1) -> list[int]:
    a, b = _salts(num_perm, seed)
    hs = [_shingle_hash(s) for s in shingles(text, k)]
    return [min((h * int(a[j]) + int(b[j])) & MASK for h in hs) for j in range(num_perm)]


def corpus(rng: random.Random, n: int) -> list[str]:
    alphabet = "abc de  FG\t\n" + "é語😀" + "xyz"
    stock = "the answer is correct and well argued, "
    out = ["", " ", "a", "ab", "abcd", "abcde", "AB\nCD", "😀😀😀😀😀😀", "aaaaaaaaaaaa"]
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            out.append(stock * rng.randint(1, 4) + str(rng.randint(0, 9)))
        else:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
    return out


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("block", [1, 7, 256])
def test_signatures_equal_the_definition(k: int, block: int) -> None:
    texts = corpus(random.Random(k * 100 + block), 120)
    got = minhash_signatures(texts, k=k, num_perm=16, block=block)
    want = np.array([by_definition(t, k, 16) for t in texts], dtype=np.uint64)
    assert got.dtype == np.uint64 and got.shape == (len(texts), 16)
    np.testing.assert_array_equal(got, want)


def test_a_tiny_hash_cache_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hash cache cleared between every block changes nothing."""
    texts = corpus(random.Random(5), 80) + ["long text " * 40]
    want = minhash_signatures(texts, num_perm=32)
    monkeypatch.setattr(telemetry, "SHINGLE_CACHE", 3)
    got = minhash_signatures(texts, num_perm=32, block=9)
    np.testing.assert_array_equal(got, want)
    assert [by_definition(texts[-1], 5, 32)] == got[-1:].tolist()
