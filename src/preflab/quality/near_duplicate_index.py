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

:class:`SpilledSearch` runs the same search over texts given one at a time (the snapshot's
per-rater pass streams them from the database) without holding them or their signatures: each
chunk of :data:`SPILL_CHUNK` texts is signed as it comes (:func:`minhash_signatures`' values: a
text's signature is its own) and written to temporary files, band by band, with the texts
(UTF-8) and their owners as small integers. Then band by band, a part of :data:`PART` texts at
a time (the texts whose band bytes hash to that part: equal bytes are in one part, so the parts'
buckets are the band's; a band of more texts is split through temporary files): the part's bytes
(``rows x 8`` bytes a text) bucketed as :func:`near_duplicate_pairs` buckets them; only a
bucket of two owners or more holds a pair to check (a tiled project puts every text in a bucket
of its own rater's copies); a candidate pair is checked in the first band that buckets it, told
from the earlier bands' bucket ids (int32 a text a band, on disk, read :data:`GROUP` members at
a time; equal ids are equal bytes), its texts read back from the file for the exact Jaccard.
The pairs, their Jaccard and their order are ``near_duplicate_pairs``'
(``tests/quality/test_near_duplicate_spilled.py``). In memory: a chunk of texts and their
signatures, one part's bytes and its sort (~100 bytes a text of the part, ~13 MB, then freed),
a group's earlier-band ids, and per text 16 bytes (its text's offset in the file, its owner's
number and its bucket id in the band being sorted) plus the 16-byte digest above.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence

import numpy as np

from .telemetry import SHINGLE_SETS, minhash_signatures, near_duplicate_pairs, shingles

#: texts :class:`SpilledSearch` signs at a time (their signatures: 512 bytes a text at 64
#: permutations)
SPILL_CHUNK = 8192
#: members of a band's buckets whose earlier bands' bucket ids are read at a time
GROUP = 65_536
#: texts :func:`minhash_signatures` takes in one array operation (its ``block``: the same
#: values; 256 held ~50 MB of salted hashes at once for the bench's rationales, 64 ~13 MB, at
#: the same CPU)
SIGN_BLOCK = 64
#: texts of a band bucketed at a time (a part of the band, by a hash of its bytes): ~100 bytes a
#: text while a part is sorted, 13 MB; a band of more texts goes through temporary files
PART = 131_072

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
        self._link(lambda i: (owners[i], texts[i]))

    def _link(self, key_of: Callable[[int], Key]) -> None:
        for a, b, sim in self.found:
            ka, kb = key_of(a), key_of(b)
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


class SpilledSearch:
    """:class:`NearDuplicateIndex`'s search over texts added one at a time (:meth:`add`), held
    in temporary files rather than in memory (this module's docstring); :meth:`index` ends it.
    Close it (or use it as a context manager) to remove the files."""

    def __init__(
        self,
        min_jaccard: float,
        k: int,
        num_perm: int,
        *,
        chunk: int | None = None,
        directory: str | None = None,
    ) -> None:
        self.params = (min_jaccard, k, num_perm)
        self.chunk = chunk or SPILL_CHUNK
        self.bands, self.rows = 16, num_perm // 16  # near_duplicate_pairs' banding
        self._dir = tempfile.TemporaryDirectory(prefix="preflab-neardup-", dir=directory)
        self._texts = open(os.path.join(self._dir.name, "texts"), "w+b")
        self._band_paths = [os.path.join(self._dir.name, f"band{b}") for b in range(self.bands)]
        self._band_files = [open(p, "wb") for p in self._band_paths]
        #: where each text starts in the texts file (and where the last ends)
        self.offsets = array("q", [0])
        #: each text's owner, numbered in the order they first come
        self.owners = array("i")
        self._owner_code: dict[Hashable, int] = {}
        self._owner_of: list[Hashable] = []
        self._pending: list[str] = []
        self._pending_owners: list[Hashable] = []
        self._digests: list[np.ndarray] = []

    def __enter__(self) -> SpilledSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for f in (self._texts, *self._band_files):
            f.close()
        self._dir.cleanup()

    def __len__(self) -> int:
        return len(self.owners)

    def add(self, owner: Hashable, text: str) -> None:
        """The next text (its index: the number added before it) and its owner."""
        code = self._owner_code.get(owner)
        if code is None:
            code = self._owner_code[owner] = len(self._owner_of)
            self._owner_of.append(owner)
        self.owners.append(code)
        data = text.encode("utf-8", "surrogatepass")
        self._texts.write(data)
        self.offsets.append(self.offsets[-1] + len(data))
        self._pending.append(text)
        self._pending_owners.append(owner)
        if len(self._pending) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        _min_jaccard, k, num_perm = self.params
        sigs = minhash_signatures(self._pending, k, num_perm, block=SIGN_BLOCK)
        for b, f in enumerate(self._band_files):
            f.write(np.ascontiguousarray(sigs[:, b * self.rows : (b + 1) * self.rows]).tobytes())
        keys = zip(self._pending_owners, self._pending, strict=True)
        self._digests.append(digests(keys, len(self._pending)))
        self._pending, self._pending_owners = [], []

    def _text(self, i: int) -> str:
        start, end = self.offsets[i], self.offsets[i + 1]
        return os.pread(self._texts.fileno(), end - start, start).decode("utf-8", "surrogatepass")

    def found(self) -> list[tuple[int, int, float]]:
        """``near_duplicate_pairs`` of the texts added, in its order."""
        self._flush()
        self._texts.flush()
        for f in self._band_files:
            f.close()
        _min_jaccard, k, _num_perm = self.params
        n = len(self.owners)
        shingled: dict[int, set[str]] = {}

        def shingle_set(i: int) -> set[str]:  # near_duplicate_pairs' bounded cache
            got = shingled.get(i)
            if got is None:
                if len(shingled) >= SHINGLE_SETS:
                    shingled.clear()
                got = shingled[i] = shingles(self._text(i), k)
            return got

        out: list[tuple[int, int, float]] = []
        ids_paths: list[str] = []
        owners = self.owners
        codes = np.frombuffer(owners, dtype=f"i{owners.itemsize}") if n else np.empty(0, "i4")
        for b in range(self.bands):
            # the band a part at a time (equal bytes in one part): each text's bucket id, the
            # parts' ids apart; the buckets of two owners or more checked as each part is sorted
            ids = np.empty(n, dtype=np.int32)
            next_id = 0
            for members, band in self._band_parts(b, n):
                part_ids, part_order, starts = _band_buckets(band)
                del band
                ids[members] = part_ids + next_id
                next_id += int(part_ids.max()) + 1 if len(part_ids) else 0
                del part_ids
                if not len(part_order):
                    continue
                order = members[part_order]  # ascending within a bucket, as members are
                del members, part_order
                self._check(b, order, starts, codes, ids_paths, shingle_set, out)
            path = os.path.join(self._dir.name, f"ids{b}")
            ids.tofile(path)
            ids_paths.append(path)
            del ids
        return sorted(out)

    def _check(
        self,
        b: int,
        order: np.ndarray,
        starts: np.ndarray,
        codes: np.ndarray,
        ids_paths: Sequence[str],
        shingle_set: Callable[[int], set[str]],
        out: list[tuple[int, int, float]],
    ) -> None:
        """The pairs of band ``b``'s buckets (``order``: their members, grouped by bucket,
        ascending within one; ``starts``: where each bucket starts) onto ``out``: each pair of
        two owners not bucketed in an earlier band, its exact Jaccard from its texts."""
        min_jaccard = self.params[0]
        owners = self.owners
        ends = np.append(starts[1:], len(order))
        # only buckets of two owners or more hold a pair to check (one owner's copies: none)
        own = codes[order]
        mixed = np.flatnonzero(np.minimum.reduceat(own, starts) != np.maximum.reduceat(own, starts))
        del own
        for group in _groups(starts[mixed], ends[mixed], GROUP):
            at = np.concatenate([np.arange(s, e) for s, e in group])
            members = order[at]
            # each member's bucket ids in the earlier bands (equal ids: bucketed there)
            earlier = np.empty((len(members), b), dtype=np.int32)
            for c in range(b):
                ids_c = np.memmap(ids_paths[c], dtype=np.int32, mode="r")
                earlier[:, c] = ids_c[members]
                del ids_c
            rows = earlier.tolist()
            pos = 0
            for s, e in group:
                bucket = members[pos : pos + e - s].tolist()
                prior = rows[pos : pos + e - s]
                pos += e - s
                for x in range(len(bucket)):
                    i, pi = bucket[x], prior[x]
                    for y in range(x + 1, len(bucket)):
                        j = bucket[y]
                        if owners[i] == owners[j]:
                            continue
                        if b and any(p == q for p, q in zip(pi, prior[y], strict=True)):
                            continue  # bucketed in an earlier band: checked there
                        sa, sb = shingle_set(i), shingle_set(j)
                        union = len(sa | sb)
                        sim = len(sa & sb) / union if union else 1.0  # :func:`jaccard`
                        if sim >= min_jaccard:
                            out.append((i, j, sim))

    def _band_parts(self, b: int, n: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Band ``b`` of the ``n`` texts in parts of about :data:`PART` texts: each part's text
        numbers (ascending, int64) and their band (texts x rows, uint64). A part is the texts
        whose band bytes hash to it (:func:`_part_of`), so equal bytes are in one part; with
        more than one part, the band is written to one temporary file a part, a chunk of
        ``PART`` texts at a time, and each part read back whole (then removed)."""
        path = self._band_paths[b]
        parts = -(-n // PART)
        if parts <= 1:
            yield (
                np.arange(n, dtype=np.int64),
                np.fromfile(path, dtype=np.uint64).reshape(n, self.rows),
            )
            return
        record = np.dtype([("i", "<i8"), ("v", "<u8", (self.rows,))])
        part_paths = [f"{path}.part{p}" for p in range(parts)]
        files = [open(p, "wb") for p in part_paths]
        try:
            with open(path, "rb") as f:
                for start in range(0, n, PART):
                    chunk = np.fromfile(f, dtype=np.uint64, count=min(PART, n - start) * self.rows)
                    chunk = chunk.reshape(-1, self.rows)
                    part = _part_of(chunk, parts)
                    order = np.argsort(part, kind="stable")
                    cuts = np.searchsorted(part[order], np.arange(parts + 1))
                    records = np.empty(len(chunk), dtype=record)
                    records["i"] = start + order
                    records["v"] = chunk[order]
                    del chunk, part, order
                    for p, fp in enumerate(files):
                        fp.write(records[cuts[p] : cuts[p + 1]].tobytes())
                    del records
        finally:
            for fp in files:
                fp.close()
        for part_path in part_paths:
            got = np.fromfile(part_path, dtype=record)
            os.remove(part_path)
            members, band = np.ascontiguousarray(got["i"]), np.ascontiguousarray(got["v"])
            del got
            yield members, band

    def index(self) -> NearDuplicateIndex:
        """The :class:`NearDuplicateIndex` of the texts added (what it would be of them as
        lists): the pairs found, the digests, the texts of the pairs (read back)."""
        found = self.found()
        out = NearDuplicateIndex.__new__(NearDuplicateIndex)
        out.params = self.params
        out.found = found
        out.searched = (
            np.unique(np.concatenate(self._digests)) if self._digests else np.empty(0, "S16")
        )
        self._digests = []
        out.similar = defaultdict(dict)
        out._link(lambda i: (self._owner_of[self.owners[i]], self._text(i)))
        return out


def _band_buckets(band: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's bucket id in ``band`` (texts x rows of a signature), int32: rows with equal
    bytes, and only they, get equal ids; the rows of the buckets of two or more, grouped by
    bucket as ``telemetry._buckets`` gives them (by id, ascending within a bucket); and where
    each bucket starts among them."""
    if not len(band):
        empty = np.empty(0, dtype=np.int64)
        return np.empty(0, dtype=np.int32), empty, empty
    keys = np.ascontiguousarray(band).view(np.dtype((np.void, band.shape[1] * band.itemsize)))
    _, inverse, counts = np.unique(keys.ravel(), return_inverse=True, return_counts=True)
    del keys
    ids = inverse.reshape(-1).astype(np.int32)
    del inverse
    rows = np.flatnonzero((counts >= 2)[ids])
    order = rows[np.argsort(ids[rows], kind="stable")]
    in_order = ids[order]
    starts = np.flatnonzero(np.diff(in_order, prepend=-1)) if len(order) else rows[:0]
    return ids, order, starts


def _groups(starts: np.ndarray, ends: np.ndarray, limit: int) -> Iterator[list[tuple[int, int]]]:
    """The buckets ``[start, end)`` in runs of at most ``limit`` members (a larger bucket alone)."""
    group: list[tuple[int, int]] = []
    size = 0
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if group and size + e - s > limit:
            yield group
            group, size = [], 0
        group.append((s, e))
        size += e - s
    if group:
        yield group


def _part_of(band: np.ndarray, parts: int) -> np.ndarray:
    """Each row's part (of ``parts``): a 64-bit mix of the row's values (equal rows, equal
    parts; MinHash values are already uniform, the mix spreads them over every part)."""
    mult = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        h = band[:, 0] * mult
        for c in range(1, band.shape[1]):
            h = (h ^ band[:, c]) * mult
    return (h >> np.uint64(32)) % np.uint64(parts)
