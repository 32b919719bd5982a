"""Near-duplicate rationales searched once, answered for any subset of the texts.

Whether two texts are a pair of :func:`preflab.quality.telemetry.near_duplicate_pairs` depends on
those two texts and their owners alone: a text's MinHash signature is its own (fixed seeds), two
texts are candidates when a band of their signatures is equal, and a candidate is kept when the
owners differ and the exact Jaccard reaches the threshold. So the pairs among a subset of the
texts are the pairs of the whole set between members of the subset, with the same Jaccard.

The dashboard's snapshot uses this to search a project's rationales once: the per-rater pass
searches every counting judgment's rationale; the quality report's flags (its label set, a subset)
are read from that search (:meth:`NearDuplicateIndex.pairs`, the signature of
``near_duplicate_pairs``, which the report's accumulator takes as its ``pair_search``).

What the index keeps alive (it lives through the report): the texts of the pairs found, and of
every text searched only a 16-byte BLAKE2b digest of its (owner, text) in one sorted numpy
column (3.2 MB for 200,000 rationales instead of the texts, ~60 MB at 1M judgments). A text
whose digest is there counts as searched: two different (owner, text) keys with one digest (a
2^-128 chance a pair) would answer a text that was not searched from the search.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from .telemetry import near_duplicate_pairs

Key = tuple[Hashable, str]


class NearDuplicateIndex:
    """The pairs of one search, by (owner, text), for the parameters it was run with."""

    def __init__(
        self,
        texts: Sequence[str],
        owners: Sequence[Hashable],
        min_jaccard: float,
        k: int,
        num_perm: int,
    ) -> None:
        self.params = (min_jaccard, k, num_perm)
        #: index pairs of ``texts`` (as ``near_duplicate_pairs`` returns them)
        self.found = near_duplicate_pairs(texts, owners, min_jaccard, k, num_perm)
        #: the digests of every (owner, text) searched, sorted (:func:`digests`)
        self.searched = np.unique(digests(zip(owners, texts, strict=True), len(texts)))
        self.similar: dict[Key, dict[Key, float]] = defaultdict(dict)
        for a, b, sim in self.found:
            ka, kb = (owners[a], texts[a]), (owners[b], texts[b])
            self.similar[ka][kb] = sim
            self.similar[kb][ka] = sim

    def pairs(
        self,
        texts: Sequence[str],
        owners: Sequence[Hashable],
        min_jaccard: float = 0.8,
        k: int = 5,
        num_perm: int = 64,
    ) -> list[tuple[int, int, float]]:
        """``near_duplicate_pairs(texts, owners, ...)``: from the search for texts that were all
        in it (a subset, in any order, repeats allowed); a text (with its owner) that was not, or
        other parameters, search anew."""
        if len(texts) != len(owners):
            raise ValueError(f"{len(texts)} texts but {len(owners)} owners")
        if (min_jaccard, k, num_perm) != self.params:
            return near_duplicate_pairs(texts, owners, min_jaccard, k, num_perm)
        where: dict[Key, list[int]] = defaultdict(list)
        for i, key in enumerate(zip(owners, texts, strict=True)):
            where[key].append(i)
        if not self._searched(where):
            return near_duplicate_pairs(texts, owners, min_jaccard, k, num_perm)
        out: list[tuple[int, int, float]] = []
        for key, mine in where.items():
            for other, sim in self.similar.get(key, {}).items():
                for i in mine:
                    out.extend((i, j, sim) for j in where.get(other, ()) if i < j)
        return sorted(out)

    def _searched(self, keys: Iterable[Key]) -> bool:
        """Whether every one of these keys was searched (its digest is in :attr:`searched`)."""
        keys = list(keys)
        if not keys:
            return True
        if not len(self.searched):
            return False
        wanted = digests(keys, len(keys))
        at = np.searchsorted(self.searched, wanted)
        at[at == len(self.searched)] = 0
        return bool((self.searched[at] == wanted).all())


def digests(keys: Iterable[Key], n: int) -> np.ndarray:
    """A 16-byte BLAKE2b digest of each (owner, text) key (``n`` of them), as an ``S16``
    column: the owner's ``repr`` and the text, UTF-8, each preceded by its byte length."""
    out = np.empty(n, dtype="S16")
    for i, (owner, text) in enumerate(keys):
        h = hashlib.blake2b(digest_size=16)
        for part in (repr(owner), text):
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        out[i] = h.digest()
    return out
