"""The near-duplicate search held on disk (:class:`SpilledSearch`, the snapshot's per-rater
pass): the pairs, Jaccard and order of :func:`near_duplicate_pairs` over the same texts, and
the :class:`NearDuplicateIndex` it makes equal to the in-memory one, whatever the chunk size
(one chunk, chunks that split buckets, a last chunk not full), on texts with every twist:
verbatim copies across raters and by one rater, edited copies bucketed in several bands,
stock phrases in large buckets, non-ASCII text, none at all."""

from __future__ import annotations

import random

import numpy as np
import pytest

from preflab.quality import near_duplicate_index
from preflab.quality.near_duplicate_index import NearDuplicateIndex, SpilledSearch
from preflab.quality.telemetry import (
    TelemetrySettings,
    minhash_signatures,
    near_duplicate_pairs,
)

from .test_near_duplicate_index import corpus

PARAMS = (
    TelemetrySettings().min_jaccard,
    TelemetrySettings().shingle,
    TelemetrySettings().num_perm,
)


def _twisted(n: int, seed: int) -> tuple[list[str], list[object]]:
    """:func:`corpus`'s stock phrases, plus one rater's own copies, non-ASCII text (the texts
    a database holds), texts shorter than a shingle, and owners of mixed types."""
    texts, owners = corpus(n, seed)
    rng = random.Random(seed)
    extra = [
        "Ça va très bien — réponse B est meilleure, sans doute.",
        "emoji 🙂 and CJK 漢字 in a rationale",
        "abc",
    ]
    out_owners: list[object] = list(owners)
    for i in range(n // 5):
        text = rng.choice(texts[: max(1, len(texts))] + extra)
        texts.append(text)
        out_owners.append(rng.choice([out_owners[i], 7, ("t", 1)]))  # the same rater's copy too
    return texts, out_owners


def _spilled(texts, owners, chunk, params=PARAMS):
    with SpilledSearch(*params, chunk=chunk) as search:
        for owner, text in zip(owners, texts, strict=True):
            search.add(owner, text)
        assert len(search) == len(texts)
        return search.index()


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
@pytest.mark.parametrize("n", [0, 1, 2, 150, 600])
def test_spilled_search_finds_the_pairs_of_the_search_in_memory(n, chunk):
    texts, owners = _twisted(n, n + chunk)
    want = NearDuplicateIndex(texts, owners, *PARAMS)
    assert want.found == near_duplicate_pairs(texts, owners, *PARAMS)
    got = _spilled(texts, owners, chunk)
    if n >= 150:
        assert want.found  # the copies are found: the comparison is not empty
    assert got.found == want.found  # same pairs, same Jaccard, same order
    assert got.params == want.params
    assert got.searched.tobytes() == want.searched.tobytes()
    assert got.similar == want.similar
    # and it answers subsets as the in-memory index does
    for sub, sub_owners in ((texts[:40], owners[:40]), (texts[::3], owners[::3])):
        assert got.pairs(sub, sub_owners, *PARAMS) == want.pairs(sub, sub_owners, *PARAMS)


def test_other_parameters_and_a_dense_bucket():
    """Other permutation counts and thresholds (bands of other widths), and one text copied
    by every rater (one bucket of all of them in every band: each pair checked once)."""
    texts = ["every rater wrote exactly this same rationale here"] * 60
    owners = [f"r{i % 9}" for i in range(60)]
    texts += corpus(200, 5)[0]
    owners += corpus(200, 5)[1]
    for params in [(0.8, 5, 64), (0.5, 3, 32), (0.9, 4, 128)]:
        want = near_duplicate_pairs(texts, owners, *params)
        assert want
        assert _spilled(texts, owners, 13, params).found == want


def test_the_default_chunk_is_read_when_the_search_starts(monkeypatch):
    monkeypatch.setattr(near_duplicate_index, "SPILL_CHUNK", 3)
    with SpilledSearch(*PARAMS) as search:
        assert search.chunk == 3


def test_the_files_are_removed(tmp_path):
    with SpilledSearch(*PARAMS, chunk=2, directory=str(tmp_path)) as search:
        for i in range(5):
            search.add(i % 2, f"a rationale long enough number {i}")
        assert list(tmp_path.iterdir())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), SpilledSearch(*PARAMS, directory=str(tmp_path)) as search:
        search.add("a", "some text long enough to be searched")
        raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("group", [1, 3, 65_536])
def test_tiled_copies_and_groups_of_buckets(monkeypatch, group):
    """A tiled project's shape (each rationale again by the same rater, as ``bench_tile.py``
    copies them: buckets of one owner, no pair to check) beside real pairs, with the buckets'
    earlier-band ids read a few members at a time (a bucket larger than ``GROUP`` alone)."""
    monkeypatch.setattr(near_duplicate_index, "GROUP", group)
    texts, owners = corpus(200, 11)
    texts, owners = texts * 3, owners * 3  # three tiles: the same texts and raters again
    want = near_duplicate_pairs(texts, owners, *PARAMS)
    assert want
    assert _spilled(texts, owners, 50).found == want


@pytest.mark.parametrize("part", [3, 7, 131_072])
def test_a_band_bucketed_a_part_at_a_time(monkeypatch, tmp_path, part):
    """A band sorted in parts of at most ``PART`` texts (by a hash of its bytes, through
    temporary files: equal bytes in one part): the same pairs, Jaccard and order as the search
    in memory, on twisted texts, tiled copies and one text copied by every rater (one bucket of
    all of them), with groups of a few buckets; the parts' files removed as they are read."""
    monkeypatch.setattr(near_duplicate_index, "PART", part)
    monkeypatch.setattr(near_duplicate_index, "GROUP", 5)
    texts, owners = _twisted(60, 3)
    tiled, tiled_owners = corpus(40, 11)
    edited, edited_owners = _edited(60, 4)
    texts += tiled * 3 + ["every rater wrote exactly this same rationale here"] * 12
    owners += tiled_owners * 3 + [f"r{i % 9}" for i in range(12)]
    for params, (all_texts, all_owners) in (
        (PARAMS, (texts + edited, owners + edited_owners)),
        ((0.5, 3, 32), (tiled * 2 + edited, tiled_owners * 2 + edited_owners)),
    ):
        want = NearDuplicateIndex(all_texts, all_owners, *params)
        assert len(want.found) > 10
        # some pairs are bucketed first in a later band (told apart by the earlier bands' ids)
        sigs = minhash_signatures(all_texts, params[1], params[2])
        rows = params[2] // 16
        assert any((sigs[a, :rows] != sigs[b, :rows]).any() for a, b, _ in want.found)
        with SpilledSearch(*params, chunk=64, directory=str(tmp_path)) as search:
            for owner, text in zip(all_owners, all_texts, strict=True):
                search.add(owner, text)
            got = search.index()
            (folder,) = tmp_path.iterdir()
            assert not [p for p in folder.iterdir() if ".part" in p.name]
        assert got.found == want.found
        assert got.similar == want.similar
        assert got.searched.tobytes() == want.searched.tobytes()


def _edited(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Long sentences and copies of them with a word or two changed, by other raters: pairs
    near the threshold, many of them bucketed in some bands and not others."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(400)]
    texts, owners = [], []
    for k in range(n):
        base = [rng.choice(words) for _ in range(30)]
        texts.append(" ".join(base))
        owners.append(f"e{k % 5}")
        for _ in range(2):
            copy = list(base)
            for _ in range(rng.randint(1, 3)):
                copy[rng.randrange(len(copy))] = rng.choice(words)
            texts.append(" ".join(copy))
            owners.append(f"e{rng.randrange(5)}")
    return texts, owners


def test_the_parts_keep_equal_bytes_together():
    """:func:`_part_of` gives equal rows one part, and spreads distinct rows over the parts."""
    rng = np.random.default_rng(0)
    band = rng.integers(0, 2**63, size=(5000, 4), dtype=np.int64).astype(np.uint64)
    band[2500:] = band[:2500]  # every row twice
    parts = near_duplicate_index._part_of(band, 7)
    assert (parts[2500:] == parts[:2500]).all()
    counts = np.bincount(parts.astype(np.int64), minlength=7)
    assert len(counts) == 7 and counts.min() > 500  # ~714 each
