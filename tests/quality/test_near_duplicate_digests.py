"""The near-duplicate index keeps a digest of each (owner, text) searched, not the texts: a key
counts as searched exactly when it was (owner and text apart: no key runs into another)."""

from __future__ import annotations

from preflab.quality.near_duplicate_index import NearDuplicateIndex, digests
from preflab.quality.telemetry import TelemetrySettings, near_duplicate_pairs

from .test_near_duplicate_index import corpus


def test_a_key_is_searched_exactly_when_it_was():
    cfg = TelemetrySettings()
    params = (cfg.min_jaccard, cfg.shingle, cfg.num_perm)
    texts, owners = corpus(60, 5)
    index = NearDuplicateIndex(texts, owners, *params)
    assert index.searched.dtype.itemsize == 16
    assert len(index.searched) == len(set(zip(owners, texts, strict=True)))
    assert index._searched(zip(owners, texts, strict=True))
    assert index._searched([])
    # the same text under an owner it was not searched with, and owner/text split elsewhere
    assert not index._searched([("nobody", texts[0])])
    assert not index._searched([(owners[0] + texts[0][:1], texts[0][1:])])
    # such a key makes the index search anew (the same answer as a search of those texts)
    sub_t, sub_o = [*texts[:20], texts[0]], [*owners[:20], "nobody"]
    assert index.pairs(sub_t, sub_o, *params) == near_duplicate_pairs(sub_t, sub_o, *params)


def test_digests_tell_owner_and_text_apart():
    keys = [("ab", "c"), ("a", "bc"), (1, "x"), ("1", "x"), ("a", "")]
    d = digests(keys, len(keys))
    assert len(set(d.tolist())) == len(keys)


def test_an_empty_index_searched_nothing():
    cfg = TelemetrySettings()
    index = NearDuplicateIndex([], [], cfg.min_jaccard, cfg.shingle, cfg.num_perm)
    assert not index._searched([("a", "some rationale that is long enough")])
    assert index.pairs([], [], cfg.min_jaccard, cfg.shingle, cfg.num_perm) == []
