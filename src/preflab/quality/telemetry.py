"""Telemetry flags on how judgments were entered. Flags are evidence for a reviewer, not verdicts.

* ``paste_dominant``: pasted characters are most of the rationale input.
* ``too_fast``: active time below a reading speed floor for the text length (default: faster
  than 1,000 words a minute, i.e. 60 ms a word, which skimming alone rarely beats).
* ``machine_typing``: coefficient of variation of inter-key intervals below ``min_iki_cv``
  (human typing is bursty, CV typically > 0.3; scripts are regular). Checked when at least
  ``min_typed_chars`` were typed, or when the summary does not say how many (a trajectory's
  producer reports ``iki_cv`` alone: it computed it over enough keys to report it).
* ``no_revision``: ``revision_ratio`` (deleted / typed characters) below ``min_revision_ratio``
  with the same typed-characters rule: people writing a judgment delete and retype; text
  entered at once with no correction at all is transcription or injection.
* ``untrusted_paste``: more than ``max_untrusted_paste_chars`` characters pasted from outside
  the labelling environment (trajectory telemetry ``untrusted_paste_chars``).

The defaults are :class:`TelemetrySettings`; a project overrides them in its policy
(``policy.telemetry``, see ``preflab.schema.policy``) and exports drop flagged labels unless
``--include-flagged``.
* ``near_duplicate_rationale``: rationales of *different* raters whose character 5-gram Jaccard
  similarity, estimated by MinHash (Broder 1997), is at least ``min_jaccard``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from preflab.schema import JudgmentBase, Telemetry
from preflab.schema.policy import TelemetryPolicy

#: the project policy's thresholds: their defaults and reasons are set there, once
_POLICY = TelemetryPolicy()


@dataclass
class TelemetrySettings:
    """Thresholds of the flags: a project's ``policy.telemetry`` (defaults:
    :class:`preflab.schema.policy.TelemetryPolicy`) and the near-duplicate search's."""

    paste_share: float = _POLICY.paste_share
    min_ms_per_word: float = _POLICY.min_ms_per_word
    min_iki_cv: float = _POLICY.min_iki_cv
    min_typed_chars: int = _POLICY.min_typed_chars
    min_revision_ratio: float = _POLICY.min_revision_ratio
    max_untrusted_paste_chars: int = _POLICY.max_untrusted_paste_chars
    #: an untrusted paste over ``max_untrusted_paste_chars`` that is at least this share of the
    #: written answer is a pasted answer: strong evidence on its own (docs/telemetry.md)
    strong_paste_share: float = _POLICY.strong_paste_share
    #: this many independent signals together (paste, speed, rhythm, editing) are strong
    #: evidence; fewer are weak and go to review with their evidence (docs/telemetry.md)
    exclude_signals: int = _POLICY.exclude_signals
    #: machine-regular typing (``machine_typing``, which people hardly ever show) with this many
    #: independent signals in all is strong evidence too (docs/telemetry.md)
    exclude_signals_with_rhythm: int = _POLICY.exclude_signals_with_rhythm
    min_jaccard: float = 0.8
    shingle: int = 5
    num_perm: int = 64

    @classmethod
    def from_policy(cls, raw: dict[str, Any] | None) -> TelemetrySettings:
        """Defaults overridden by a project's ``policy.telemetry`` mapping (unknown keys: error)."""
        raw = dict(raw or {})
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"policy.telemetry: unknown setting(s) {unknown}; known: {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**raw)

    @classmethod
    def of(cls, policy: TelemetryPolicy) -> TelemetrySettings:
        """A project's thresholds (``policy.telemetry``), the near-duplicate search's defaults."""
        return cls(**policy.model_dump())


#: distinct shingles whose hash :func:`minhash_signatures` keeps between texts (cleared when
#: full: the same hashes, computed again)
SHINGLE_CACHE = 200_000
#: texts whose shingle sets :func:`near_duplicate_pairs` keeps while confirming candidates
SHINGLE_SETS = 1_000


def shingles(text: str, k: int = 5) -> set[str]:
    t = " ".join(str(text).lower().split())
    return {t[i : i + k] for i in range(max(1, len(t) - k + 1))}


def minhash_signature(text: str, k: int = 5, num_perm: int = 64, seed: int = 1) -> np.ndarray:
    """MinHash of the character k-shingles: ``num_perm`` minima of salted 64-bit hashes."""
    result: np.ndarray = minhash_signatures([text], k, num_perm, seed)[0]
    return result


@functools.lru_cache(maxsize=8)
def _salts(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 2**61 - 1, num_perm, dtype=np.uint64) | np.uint64(1)
    b = rng.integers(0, 2**61 - 1, num_perm, dtype=np.uint64)
    return a, b


def _shingle_hash(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


def minhash_signatures(
    texts: Sequence[str], k: int = 5, num_perm: int = 64, seed: int = 1, block: int = 256
) -> np.ndarray:
    """:func:`minhash_signature` of each text, one row each: a shingle's hash is computed once
    for all the texts, and the salted minima of ``block`` texts at a time in one array operation
    (the same values: a minimum does not depend on the order of the shingles)."""
    return _sign(texts, k, num_perm, seed, block, False)[0]


def _sign(
    texts: Sequence[str], k: int, num_perm: int, seed: int, block: int, sketch: bool
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`minhash_signatures`, and with ``sketch`` each text's shingle count (``len`` of its
    :func:`shingles`) and shingle bitmap (:data:`SKETCH_BITS` bits, packed: a shingle sets the
    bit its hash's low bits name) for :func:`_may_reach`."""
    a, b = _salts(num_perm, seed)
    # the shingles hashed so far: a shingle's number in ``ids`` (given when first looked up),
    # its hash in ``known`` (numbers read as small ints into an array in one pass, the hashes
    # gathered from there: a Python loop a shingle, and 64-bit Python ints, are slow)
    ids = _Numbering()
    known = np.empty(0, dtype=np.uint64)
    out = np.empty((len(texts), num_perm), dtype=np.uint64)
    sizes = np.empty(len(texts), dtype=np.int64) if sketch else None
    bitmaps = np.empty((len(texts), SKETCH_BITS // 8), dtype=np.uint8) if sketch else None
    for start in range(0, len(texts), block):
        if len(ids) > SHINGLE_CACHE:  # bounded: a shingle seen again is hashed again
            ids.clear()
            known = known[:0]
        numbers: list[int] = []
        counts: list[int] = []
        for text in texts[start : start + block]:
            shingled = shingles(text, k)  # looked up while in the cache: ~25 % faster
            numbers.extend(map(ids.__getitem__, shingled))
            counts.append(len(shingled))
        found = np.array(numbers, dtype=np.intp)
        del numbers
        if ids.new:
            fresh = np.fromiter(map(_shingle_hash, ids.new), dtype=np.uint64, count=len(ids.new))
            known = np.concatenate([known, fresh])
            ids.new = []
        base = known[found]
        del found
        count = np.array(counts, dtype=np.int64)
        starts = np.cumsum(count) - count
        with np.errstate(over="ignore"):
            hashed = base[None, :] * a[:, None] + b[:, None]
        out[start : start + len(starts)] = np.minimum.reduceat(hashed, starts, axis=1).T
        del hashed
        if sizes is not None and bitmaps is not None:
            sizes[start : start + len(starts)] = count
            bits = np.zeros((len(starts), SKETCH_BITS), dtype=bool)
            rows = np.repeat(np.arange(len(starts)), count)
            bits[rows, (base & np.uint64(SKETCH_BITS - 1)).astype(np.intp)] = True
            bitmaps[start : start + len(starts)] = np.packbits(bits, axis=1)
    return out, sizes, bitmaps


class _Numbering(dict[str, int]):
    """Shingles numbered in the order first looked up (``self[shingle]``); ``new``: the ones
    numbered since it was last emptied."""

    def __init__(self) -> None:
        super().__init__()
        self.new: list[str] = []

    def __missing__(self, key: str) -> int:
        number = self[key] = len(self)
        self.new.append(key)
        return number

    def clear(self) -> None:
        super().clear()
        self.new = []


#: bits of a text's shingle bitmap (:func:`_sign`): 64 bytes a text
SKETCH_BITS = 512
#: candidate pairs :func:`near_duplicate_pairs` screens in one array operation
PAIR_CHUNK = 65_536


class _ShingleSets(dict[str, set[str]]):
    """Each text's :func:`shingles`, kept by text for the candidate pairs it is in, at most
    :data:`SHINGLE_SETS` at a time (all dropped when full): ``self(text)``."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def __call__(self, text: str) -> set[str]:
        found = self.get(text)
        if found is None:
            if len(self) >= SHINGLE_SETS:
                self.clear()
            found = self[text] = shingles(text, self.k)
        return found


def jaccard(a: str, b: str, k: int = 5) -> float:
    sa, sb = shingles(a, k), shingles(b, k)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def near_duplicate_pairs(
    texts: Sequence[str],
    owners: Sequence[Any],
    min_jaccard: float = 0.8,
    k: int = 5,
    num_perm: int = 64,
) -> list[tuple[int, int, float]]:
    """Index pairs of texts by different owners with MinHash-estimated Jaccard >= ``min_jaccard``
    (candidates from LSH banding, then confirmed with the exact Jaccard).

    The candidates are screened in bulk before the exact Jaccard: a pair is dropped when its
    owners are equal, when an earlier band buckets it (it was checked there), or when even an
    upper bound of its Jaccard is below ``min_jaccard`` (:func:`_may_reach`: from the texts'
    shingle counts and bitmaps). The bound never drops a pair that reaches the threshold, so
    the pairs, their Jaccard (computed from the shingle sets as :func:`jaccard` does) and their
    order are those of checking every candidate (:func:`_near_duplicate_pairs_loop`, kept for
    owners that are not all strings)."""
    if len(texts) != len(owners):
        raise ValueError(f"{len(texts)} texts but {len(owners)} owners")
    if not all(type(o) is str for o in owners) or num_perm % 16:
        return _near_duplicate_pairs_loop(texts, owners, min_jaccard, k, num_perm)
    sigs, sizes, bitmaps = _sign(texts, k, num_perm, 1, 256, True)
    assert sizes is not None and bitmaps is not None
    codes: dict[str, int] = {}
    owner = np.fromiter(
        (codes.setdefault(o, len(codes)) for o in owners), dtype=np.int64, count=len(owners)
    )
    words = bitmaps.view(np.uint64)  # SKETCH_BITS / 64 words a text
    bands, rows = 16, num_perm // 16
    # each text's bucket in each band (4 bytes a text a band, beside its 512-byte signature)
    ids = np.empty((bands, len(texts)), dtype=np.int32)
    out: list[tuple[int, int, float]] = []
    shingle_set = _ShingleSets(k)  # bounded, by text (a stock phrase is in many)

    for b in range(bands):
        order, starts, ids[b] = _bucket_rows(sigs[:, b * rows : (b + 1) * rows])
        for i, j in _pairs_in_buckets(order, starts, PAIR_CHUNK):
            keep = owner[i] != owner[j]
            for c in range(b):  # bucketed in an earlier band: checked there
                keep &= ids[c, i] != ids[c, j]
            i, j = i[keep], j[keep]
            keep = _may_reach(sizes[i], sizes[j], words[i], words[j], min_jaccard)
            for x, y in zip(i[keep].tolist(), j[keep].tolist(), strict=True):
                sa, sb = shingle_set(texts[x]), shingle_set(texts[y])
                union = len(sa | sb)
                sim = len(sa & sb) / union if union else 1.0  # :func:`jaccard`
                if sim >= min_jaccard:
                    out.append((x, y, sim))
    return sorted(out)


def _may_reach(
    size_a: np.ndarray,
    size_b: np.ndarray,
    words_a: np.ndarray,
    words_b: np.ndarray,
    min_jaccard: float,
) -> np.ndarray:
    """Whether pairs of texts may have a Jaccard of ``min_jaccard`` or more: False only where
    an upper bound of it is below. A bit set in one text's bitmap and not the other's is a
    shingle (one at least) of the first that the second lacks, so the shared shingles are at
    most ``|A| - popcount(A & ~B)`` (and the same from B); the Jaccard ``I / (|A| + |B| - I)``
    grows with ``I``, and so does its float quotient (a correctly rounded division is
    monotonic): at the bound it is at least the pair's :func:`jaccard`."""
    only_a = _popcount(words_a & ~words_b)
    only_b = _popcount(words_b & ~words_a)
    shared = np.minimum(size_a - only_a, size_b - only_b)
    union = size_a + size_b - shared
    reach: np.ndarray = shared / union >= min_jaccard
    return reach


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits of each row of ``words`` (uint64)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        result: np.ndarray = np.bitwise_count(words).sum(axis=1, dtype=np.int64)
        return result
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), axis=1)
    result = bits.sum(axis=1, dtype=np.int64)
    return result


def _pairs_in_buckets(
    order: np.ndarray, starts: np.ndarray, limit: int
) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """The pairs ``(members[x], members[y])``, ``x < y``, of each bucket (``order[starts[q]:
    starts[q + 1]]``), as two index columns of about ``limit`` pairs at a time (more where one
    member alone pairs with more)."""
    if not len(order):
        return
    sizes = np.diff(np.append(starts, len(order)))
    ends = np.repeat(starts + sizes, sizes)
    follow = ends - np.arange(len(order)) - 1  # the members after each in its bucket
    done = np.cumsum(follow)
    pos = 0
    while pos < len(order):
        before = int(done[pos - 1]) if pos else 0
        stop = max(int(np.searchsorted(done, before + limit, side="right")), pos + 1)
        at = np.arange(pos, stop)
        f = follow[pos:stop]
        total = int(f.sum())
        if total:
            first = np.repeat(at, f)
            step = np.arange(total) - np.repeat(np.cumsum(f) - f, f)
            yield order[first], order[first + 1 + step]
        pos = stop


def _bucket_rows(band: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, ids)``: the rows of ``band`` in buckets of two or more equal rows, as
    :func:`_buckets` gives them (by bucket, ascending within one), where each bucket starts in
    ``order``, and each row's bucket number (equal numbers: equal rows)."""
    if not len(band):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    keys = np.ascontiguousarray(band).view(np.dtype((np.void, band.shape[1] * band.itemsize)))
    _, inverse, counts = np.unique(keys.ravel(), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1).astype(np.int64, copy=False)
    rows = np.flatnonzero((counts >= 2)[inverse])
    order = rows[np.argsort(inverse[rows], kind="stable")]
    starts = np.flatnonzero(np.diff(inverse[order], prepend=-1)) if len(order) else rows[:0]
    return order, starts, inverse


def _near_duplicate_pairs_loop(
    texts: Sequence[str],
    owners: Sequence[Any],
    min_jaccard: float = 0.8,
    k: int = 5,
    num_perm: int = 64,
) -> list[tuple[int, int, float]]:
    """:func:`near_duplicate_pairs` checking every candidate in turn (owners of any type)."""
    sigs = minhash_signatures(texts, k, num_perm)
    bands, rows = 16, num_perm // 16
    width = rows * sigs.itemsize  # a band's bytes in a signature row
    out: list[tuple[int, int, float]] = []
    # each text's shingles once for every candidate pair it is in (a stock phrase is in many),
    # by text, at most SHINGLE_SETS at a time: :func:`jaccard`'s value
    shingle_set = _ShingleSets(k)

    # band by band (the pairs found do not depend on the order, and the result is sorted): one
    # band's buckets in memory, found by sorting the band's bytes. A pair is checked in the
    # first band that buckets it (its signatures' bytes are equal in no band before): no set of
    # the pairs checked.
    for b in range(bands):
        for members in _buckets(sigs[:, b * rows : (b + 1) * rows]):
            raw = {m: sigs[m].tobytes() for m in members} if b else {}
            for x in range(len(members)):
                i = members[x]
                for y in range(x + 1, len(members)):
                    j = members[y]
                    if owners[i] == owners[j]:
                        continue
                    if b and _bucketed_before(raw[i], raw[j], b, width):
                        continue
                    sa, sb = shingle_set(texts[i]), shingle_set(texts[j])
                    union = len(sa | sb)
                    sim = len(sa & sb) / union if union else 1.0  # :func:`jaccard`
                    if sim >= min_jaccard:
                        out.append((i, j, sim))
    return sorted(out)


def _bucketed_before(a: bytes, b: bytes, band: int, width: int) -> bool:
    """Whether two signatures (their rows' bytes) are equal in a band before ``band``."""
    return any(a[s : s + width] == b[s : s + width] for s in range(0, band * width, width))


def _buckets(band: np.ndarray) -> list[list[int]]:
    """The rows of ``band`` (texts x rows of a signature) that are equal, two or more each, in
    ascending order within a bucket."""
    if not len(band):
        return []
    keys = np.ascontiguousarray(band).view(np.dtype((np.void, band.shape[1] * band.itemsize)))
    _, inverse, counts = np.unique(keys.ravel(), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    shared = np.flatnonzero(counts >= 2)
    if not len(shared):
        return []
    rows = np.flatnonzero(np.isin(inverse, shared))
    order = rows[np.argsort(inverse[rows], kind="stable")]
    cuts = np.flatnonzero(np.diff(inverse[order])) + 1
    return [part.tolist() for part in np.split(order, cuts)]


def summary_flags(
    tel: Telemetry | dict[str, Any],
    words_to_read: int | None = None,
    settings: TelemetrySettings | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """``[(flag, evidence)]`` of one telemetry summary (a :class:`Telemetry` or its dict).
    ``words_to_read``: for ``too_fast``; None skips it."""
    cfg = settings or TelemetrySettings()
    if isinstance(tel, dict):
        tel = Telemetry.model_validate(tel)
    out: list[tuple[str, dict[str, Any]]] = []
    pasted, typed = tel.pasted_chars or 0, tel.typed_chars or 0
    # pastes from the page itself (a quoted answer) are not the rater's outside source
    outside = (
        pasted if tel.untrusted_paste_chars is None else min(pasted, tel.untrusted_paste_chars)
    )
    if pasted + typed > 0 and outside / (pasted + typed) >= cfg.paste_share:
        out.append(("paste_dominant", {"pasted_chars": pasted, "typed_chars": typed}))
    if (
        words_to_read
        and tel.active_ms is not None
        and tel.active_ms / words_to_read < cfg.min_ms_per_word
    ):
        out.append(
            (
                "too_fast",
                {
                    "active_ms": tel.active_ms,
                    "words": words_to_read,
                    "ms_per_word": tel.active_ms / words_to_read,
                },
            )
        )
    enough_keys = tel.typed_chars is None or tel.typed_chars >= cfg.min_typed_chars
    if enough_keys and tel.iki_cv is not None and tel.iki_cv < cfg.min_iki_cv:
        out.append(("machine_typing", {"iki_cv": tel.iki_cv}))
    if (
        enough_keys
        and tel.revision_ratio is not None
        and tel.revision_ratio < cfg.min_revision_ratio
    ):
        out.append(("no_revision", {"revision_ratio": tel.revision_ratio}))
    untrusted = tel.untrusted_paste_chars
    if untrusted is not None and untrusted > cfg.max_untrusted_paste_chars:
        out.append(("untrusted_paste", {"untrusted_paste_chars": untrusted}))
    return out


def judgment_flags(
    j: JudgmentBase, words_to_read: int | None = None, settings: TelemetrySettings | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``[(flag, evidence)]`` of one judgment from its own telemetry (every flag but the
    cross-rater ``near_duplicate_rationale``). ``words_to_read``: for ``too_fast``; None skips it."""
    tel = j.provenance.telemetry
    if tel is None:
        return []
    return summary_flags(tel, words_to_read, settings)


#: The independent kinds of evidence: flags of one family say the same thing once.
SIGNAL_FAMILY = {
    "paste_dominant": "paste",
    "untrusted_paste": "paste",
    "too_fast": "speed",
    "machine_typing": "rhythm",
    "no_revision": "editing",
}

#: The manifest's and the review queue's name for a pasted answer (strong on its own).
PASTED_ANSWER = "pasted_answer"


@dataclass(frozen=True)
class Assessment:
    """What one label's telemetry says, and whether it is enough to keep the label out.

    ``flags``: every flag with its evidence. ``exclude``: strong evidence (a pasted answer, or
    ``exclude_signals`` independent signals together): the label stays out of exports until a
    reviewer decides. Otherwise the flags are weak: the label is exported and the flags are
    shown to reviewers as evidence. ``reason``: the manifest's key for the label, the flag
    combination (``machine_typing+no_revision+too_fast``) or ``pasted_answer``; ``why``: in
    words, for a reviewer."""

    flags: list[tuple[str, dict[str, Any]]]
    exclude: bool = False
    reason: str = ""
    why: str = ""

    @property
    def names(self) -> list[str]:
        return sorted(name for name, _ in self.flags)

    @property
    def signals(self) -> list[str]:
        """The independent families the flags belong to."""
        return sorted({SIGNAL_FAMILY[n] for n in self.names if n in SIGNAL_FAMILY})

    @property
    def weak(self) -> bool:
        return bool(self.flags) and not self.exclude


def assess_summary(
    tel: Telemetry | dict[str, Any] | None,
    words_to_read: int | None = None,
    written_chars: int | None = None,
    settings: TelemetrySettings | None = None,
) -> Assessment:
    """The :class:`Assessment` of one telemetry summary. ``written_chars``: the length of what the
    rater submitted (rationale, demonstration text), for the size of a paste against the answer;
    the summary's own typed + pasted characters count when larger. The thresholds and how they
    were chosen: docs/telemetry.md (``benchmarks/calibrate_telemetry.py``)."""
    cfg = settings or TelemetrySettings()
    if tel is None:
        return Assessment([])
    if isinstance(tel, dict):
        tel = Telemetry.model_validate(tel)
    flags = summary_flags(tel, words_to_read, cfg)
    if not flags:
        return Assessment(flags)
    names = sorted(name for name, _ in flags)
    pasted, typed = tel.pasted_chars or 0, tel.typed_chars or 0
    untrusted = tel.untrusted_paste_chars if tel.untrusted_paste_chars is not None else pasted
    answer = max(written_chars or 0, pasted + typed)
    if untrusted > cfg.max_untrusted_paste_chars and (
        answer == 0 or untrusted >= cfg.strong_paste_share * answer
    ):
        size = f", {untrusted / answer:.0%} of the {answer} characters entered" if answer else ""
        why = f"pasted answer: {untrusted} characters pasted from outside the page{size}"
        return Assessment(flags, True, PASTED_ANSWER, why)
    signals = sorted({SIGNAL_FAMILY[n] for n in names})
    reason = "+".join(names)
    needed = (
        min(cfg.exclude_signals, cfg.exclude_signals_with_rhythm)
        if "rhythm" in signals
        else cfg.exclude_signals
    )
    if len(signals) >= needed:
        why = f"{len(signals)} independent signals together: {', '.join(names)}"
        return Assessment(flags, True, reason, why)
    why = (
        f"weak signal{'s' if len(names) > 1 else ''} ({', '.join(names)}): exported, "
        f"shown to reviewers as evidence; {cfg.exclude_signals} independent signals or a pasted "
        "answer keep a label out"
    )
    return Assessment(flags, False, reason, why)


def written_chars(j: JudgmentBase) -> int:
    """Characters the rater submitted: the rationale, and a demonstration's text."""
    n = len(j.rationale or "")
    as_text = getattr(j, "as_text", None)
    if j.kind == "demonstration" and as_text is not None:
        n += len(as_text())
    return n


def assess(
    j: JudgmentBase, words_to_read: int | None = None, settings: TelemetrySettings | None = None
) -> Assessment:
    """:func:`assess_summary` of a judgment's telemetry (the export's and the reviewers' rule)."""
    return assess_summary(j.provenance.telemetry, words_to_read, written_chars(j), settings)


def telemetry_flags(
    judgments: Iterable[JudgmentBase],
    text_length: Callable[[JudgmentBase], int] | None = None,
    settings: TelemetrySettings | None = None,
) -> list[dict[str, Any]]:
    """One entry per flagged judgment: ``{"index", "item_id", "rater", "flag", "evidence"}``.

    ``text_length(judgment)`` gives the words the rater had to read (for ``too_fast``); without
    it that check is skipped.
    """
    cfg = settings or TelemetrySettings()
    js = list(judgments)
    flags: list[dict[str, Any]] = []

    def flag(i: int, j: JudgmentBase, name: str, evidence: dict[str, Any]) -> None:
        flags.append(
            {
                "index": i,
                "item_id": j.item_id,
                "rater": j.provenance.rater_id,
                "flag": name,
                "evidence": evidence,
            }
        )

    for i, j in enumerate(js):
        for name, evidence in judgment_flags(j, text_length(j) if text_length else None, cfg):
            flag(i, j, name, evidence)
    with_text = [(i, j) for i, j in enumerate(js) if j.rationale and len(j.rationale) >= 20]
    dups = near_duplicate_pairs(
        [j.rationale or "" for _, j in with_text],
        [j.provenance.rater_id for _, j in with_text],
        cfg.min_jaccard,
        cfg.shingle,
        cfg.num_perm,
    )
    for a, b, sim in dups:
        (ia, ja), (ib, jb) = with_text[a], with_text[b]
        flag(
            ia,
            ja,
            "near_duplicate_rationale",
            {"other_index": ib, "other_rater": jb.provenance.rater_id, "jaccard": sim},
        )
        flag(
            ib,
            jb,
            "near_duplicate_rationale",
            {"other_index": ia, "other_rater": ja.provenance.rater_id, "jaccard": sim},
        )
    return flags
