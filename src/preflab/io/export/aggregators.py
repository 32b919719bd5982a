"""Model-based pair aggregators for exports, built on :mod:`preflab.quality.aggregation`.

:func:`~.resolve.aggregate_pairwise` (plurality) is the default. Dawid-Skene (Dawid & Skene,
1979) pools all of a project's votes to learn each rater's confusion matrix over
{first better, tie, second better}, so a reliable rater outweighs two careless ones.

**No invented winners.** A model aggregator decides a unit only when its posterior separates
the candidates: the winning side's posterior must exceed every other side's by at least
:data:`POSTERIOR_MARGIN` (0.1, i.e. at least 0.55 against 0.45 between two sides). Closer units
(an even split among raters the model knows nothing about gives exactly 0.5 / 0.5) are
dropped and logged as ``no-majority``, the reason plurality uses for a shared top count, so
no tie is ever broken by candidate order. Each aggregator states its rule in ``margin``
(recorded in the manifest).
"""

from __future__ import annotations

import hashlib
import heapq
import pickle
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...quality.aggregation.dawid_skene import (
    MIN_LABELS,
    dawid_skene_design,
    design_from_keys,
    pooled_from_counts,
)
from .resolve import (
    DropLog,
    PairAggregator,
    PairVote,
    ResolvedPair,
    aggregate_pairwise,
    resolved_pair,
)
from .spill import Spill, Tape

#: The least gap between the winning side's posterior and any other side's for a model
#: aggregator to decide a unit (see the module docstring).
POSTERIOR_MARGIN = 0.1

#: Preference sides in canonical order, mirrored: the canonical order (sorted candidate ids) is
#: arbitrary, so the model treats "first better" and "second better" alike.
MIRROR = {-1: 1, 0: 0, 1: -1}


#: Joins a unit's item and canonical pair into one key (ids never hold it).
UNIT_SEP = "\x1f"


def unit_key(v: PairVote) -> str:
    return f"{v.item_id}{UNIT_SEP}{v.lo}{UNIT_SEP}{v.hi}"


def _sign(score: float) -> int:
    return int((score > 0) - (score < 0))


def aggregate_pairwise_dawid_skene(
    votes: Iterable[PairVote], drops: DropLog | None = None
) -> list[ResolvedPair]:
    """Winner per pair = the Dawid-Skene posterior mode; strength = the median strength of the
    winning votes times the posterior gap between the two sides (:func:`posterior_gap`).

    The model is fitted with :data:`MIRROR` symmetry and the library's evidence rule (raters with
    fewer than :data:`~preflab.quality.aggregation.dawid_skene.MIN_LABELS` labels share one
    confusion matrix, so they weigh alike). ``agreement`` reports the posterior probability of
    the winning side. Units whose posterior
    does not separate the sides by :data:`POSTERIOR_MARGIN` are dropped as ``no-majority``;
    units whose mode is a tie as ``tie``, like the plurality rule.
    """
    votes = list(votes)
    if not votes:
        return []
    columns = VoteColumns()
    columns.add(votes)
    return DawidSkeneFit(columns).decide(votes, drops)


class VoteColumns:
    """Every vote of an export as the fit's input, compact: a code per vote for its unit (a
    sequence number, in reading order) and its rater (first-appearance order), and its side;
    per unit the sides its votes took; the unit keys on disk.

    Each call of :meth:`add` (one chunk of items of a streamed export) numbers its distinct unit
    keys from where the last call stopped, in first-appearance order, with a dict of that call's
    keys only (all of a unit's votes come from one item, so from one chunk), and records the
    call by a digest of those keys in order (:attr:`calls`): a later read of the same chunk
    finds its sequence numbers again without a dict of every key. The keys with their sequence
    numbers go to sorted runs of up to ``run_keys`` keys (on ``spill``'s disk, else in memory),
    which :meth:`merged` merges into the keys' sorted order, the order the fit numbers the units
    in. A vote costs 9 bytes, a unit 1 byte (its sides) and a call's digest a few dozen; the
    keys stay on disk.
    """

    def __init__(self, spill: Spill | None = None, run_keys: int | None = None) -> None:
        self.spill = spill
        self.run_keys = max(1, RUN_KEYS if run_keys is None else run_keys)
        self.rater_code: dict[str, int] = {}
        #: per vote, in reading order (up to :data:`~.spill.MEMORY_VALUES` in memory, the rest
        #: on ``spill``'s disk; all three spill at the same counts, so their blocks align)
        self.units = Tape("i", spill)
        self.raters = Tape("i", spill)
        self.signs = Tape("b", spill)
        #: per unit sequence number: bit ``side + 1`` set when one of its votes took ``side``
        self.masks = bytearray()
        #: a call's digest of its distinct unit keys in order -> (first sequence number, count)
        self.calls: dict[bytes, tuple[int, int]] = {}
        self.runs: list[Path | list[tuple[str, int]]] = []
        self.run: list[tuple[str, int]] = []

    def __len__(self) -> int:
        return len(self.signs)

    @property
    def n_units(self) -> int:
        """Sequence numbers given (distinct unit keys, unless a unit spans two calls)."""
        return len(self.masks)

    def add(self, votes: Iterable[PairVote]) -> None:
        rater_code, masks = self.rater_code, self.masks
        base = len(masks)
        local: dict[str, int] = {}
        units, raters, signs = array("i"), array("i"), array("b")
        for v in votes:
            unit = unit_key(v)
            u = local.get(unit)
            if u is None:
                u = local[unit] = base + len(local)
                masks.append(0)
            r = rater_code.get(v.rater)
            if r is None:
                r = rater_code[v.rater] = len(rater_code)
            sign = _sign(v.score)
            units.append(u)
            raters.append(r)
            signs.append(sign)
            masks[u] |= 1 << (sign + 1)
        self.units.extend(units)
        self.raters.extend(raters)
        self.signs.extend(signs)
        if not local:
            return
        self.calls.setdefault(call_digest(local), (base, len(local)))
        self.run.extend(local.items())
        if len(self.run) >= self.run_keys:
            self.flush()

    def flush(self) -> None:
        """The keys gathered so far, sorted, as a run (a file of ``spill``, else in memory)."""
        if not self.run:
            return
        run, self.run = self.run, []
        run.sort()
        if self.spill is None:
            self.runs.append(run)
            return
        path = self.spill.file("ds-keys")
        with path.open("wb") as f:
            for at in range(0, len(run), RUN_BLOCK):
                pickle.dump(run[at : at + RUN_BLOCK], f, protocol=pickle.HIGHEST_PROTOCOL)
        self.runs.append(path)

    def merged(self) -> Iterator[tuple[str, int]]:
        """Every ``(unit key, sequence number)`` in the keys' sorted order (code point order,
        as Python and numpy compare strings)."""
        self.flush()
        return heapq.merge(*(_read_run(run) for run in self.runs))

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The votes' ``(unit sequence numbers, rater codes, sides)``, a block at a time."""
        for units, raters, signs in zip(
            self.units.blocks(), self.raters.blocks(), self.signs.blocks(), strict=True
        ):
            assert len(units) == len(raters) == len(signs)
            yield (
                np.frombuffer(units, dtype=np.int32),
                np.frombuffer(raters, dtype=np.int32),
                np.frombuffer(signs, dtype=np.int8),
            )

    def release(self) -> None:
        """Drop the per-vote columns (the fit has what it needs of them)."""
        spill = self.units.spill
        self.units, self.raters, self.signs = Tape("i", spill), Tape("i", spill), Tape("b", spill)


#: unit keys per sorted run of :class:`VoteColumns` (~200 bytes each while gathered)
RUN_KEYS = 100_000
#: keys per pickled block of a run file (what a merge holds per run)
RUN_BLOCK = 1_000


def call_digest(keys: Iterable[str]) -> bytes:
    """A digest of unit keys in order (a call of :meth:`VoteColumns.add`)."""
    h = hashlib.blake2b(digest_size=16)
    for key in keys:
        h.update(key.encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.digest()


def _read_run(run: Path | list[tuple[str, int]]) -> Iterator[tuple[str, int]]:
    if isinstance(run, list):
        yield from run
        return
    with run.open("rb") as f:
        while True:
            try:
                block = pickle.load(f)
            except EOFError:
                return
            yield from block


def _sorted_codes(names: dict[str, int]) -> tuple[np.ndarray, list[str]]:
    """``rank[code]``: each first-appearance code's place among the names sorted (the order
    ``np.unique`` gives the strings themselves), and the names in that order."""
    ordered = sorted(names)  # code point order, as numpy compares unicode
    rank = np.empty(len(ordered), dtype=np.int64)
    rank[[names[name] for name in ordered]] = np.arange(len(ordered), dtype=np.int64)
    return rank, ordered


#: why :meth:`DawidSkeneFit.drops` drops a unit, by code (0: decided)
DROP_REASONS = {1: "no-majority", 2: "tie", 3: "no-supporting-vote"}


class DawidSkeneFit:
    """The model fitted on every vote of an export (unit, rater, side of each): each unit's
    posterior and mode. :meth:`decide` resolves any subset of the units (a chunk of items of a
    streamed export) as :func:`aggregate_pairwise_dawid_skene` resolves them all.

    The fit runs on integer codes numbered in the sorted order of the unit keys and rater ids
    (the units' ranks come from merging :class:`VoteColumns`' sorted runs), so its design
    matrix, iterations and posteriors are those of the fit on the strings (numpy's sorted
    unique values): :func:`~preflab.quality.aggregation.dawid_skene.dawid_skene_design`, on a
    design matrix built as CSR from one int64 key a vote. Held afterwards: per unit sequence
    number its posterior row and mode (on ``votes.spill``'s disk when it has one, read back a
    call's block at a time by :meth:`decide`), per unit a drop code, and the calls' digests; no
    unit key.
    """

    def __init__(self, votes: VoteColumns, rows: int | None = None) -> None:
        # Only the classes that occur: an unused class (e.g. no rater ever said "tie") gives EM
        # a degenerate direction to absorb probability mass into.
        # "first better" and "second better" are sides of a canonical order (sorted ids) that
        # says nothing about the answers: the model is symmetric under swapping them (``mirror``).
        self.votes = votes
        masks = np.frombuffer(votes.masks, dtype=np.uint8)
        seen = int(np.bitwise_or.reduce(masks)) if len(masks) else 0
        present = {side for side in (-1, 0, 1) if seen >> (side + 1) & 1}
        self.classes = np.array(sorted({*present, *(-s for s in present)}), dtype=np.int64)
        k = len(self.classes)
        code_of = np.zeros(3, dtype=np.int64)  # side + 1 -> class index
        code_of[self.classes + 1] = np.arange(k)
        # each sequence number's rank among the distinct keys sorted
        n_seq = votes.n_units
        rank: np.ndarray = np.empty(n_seq, dtype=np.int32 if n_seq < 2**31 else np.int64)
        n_u, previous = 0, None
        for name, seq in votes.merged():
            if name != previous:
                n_u += 1
                previous = name
            rank[seq] = n_u - 1
        del previous
        rater_rank, _ = _sorted_codes(votes.rater_code)
        counts = np.zeros(len(rater_rank), dtype=np.int64)
        for _, raters_in, _ in votes.blocks():
            counts += np.bincount(rater_rank[raters_in], minlength=len(rater_rank))
        fit_of, n_fit = pooled_from_counts(counts, MIN_LABELS)
        # a vote's key: unit rank * columns + fit rater * K + class, a block at a time
        n_cols = n_fit * k
        n_votes = len(votes)
        key = np.empty(n_votes, dtype=np.int64)
        a = 0
        for units_in, raters_in, signs in votes.blocks():
            b = a + len(units_in)
            part = rank[units_in].astype(np.int64)
            part *= n_cols
            part += fit_of[rater_rank[raters_in]] * k
            part += code_of[signs.astype(np.int64) + 1]
            key[a:b] = part
            a = b
            del part, units_in, raters_in, signs
        assert a == n_votes
        votes.release()
        design = design_from_keys(key, n_u, n_cols)
        del key
        posteriors, labels, _ = dawid_skene_design(
            design,
            fit_of,
            n_fit,
            self.classes,
            n_votes,
            mirror=MIRROR,
            rows=rows,
        )
        del design
        self.n_units = n_u
        # what drops() logs, per unit: its sides are those of every sequence number it has
        sides = np.zeros(n_u, dtype=np.uint8)
        np.bitwise_or.at(sides, rank, np.frombuffer(votes.masks, dtype=np.uint8))
        self.drop_code = np.zeros(n_u, dtype=np.int8)
        labels8 = labels.astype(np.int8)
        step = 1 << 18
        for a in range(0, n_u, step):
            b = min(a + step, n_u)
            side = labels8[a:b].astype(np.int64)
            took = (sides[a:b] >> (side + 1)) & 1
            code = np.where(side == 0, 2, np.where(took == 0, 3, 0))
            if k >= 2:
                ordered = np.sort(posteriors[a:b], axis=1)
                code = np.where(ordered[:, -1] - ordered[:, -2] >= POSTERIOR_MARGIN, code, 1)
            self.drop_code[a:b] = code
        del sides
        # per sequence number (reading order): its unit's posterior row and mode
        self.store = _SeqStore(votes.spill, k)
        for a in range(0, n_seq, step):
            b = min(a + step, n_seq)
            self.store.append(posteriors[rank[a:b]], labels8[rank[a:b]])
        del posteriors, labels, labels8, rank
        self.store.close_writing()
        self._index: dict[str, int] | None = None

    def keys(self) -> Iterator[str]:
        """The distinct unit keys in the fit's order (merged from disk)."""
        previous = None
        for key, _ in self.votes.merged():
            if key != previous:
                yield key
                previous = key

    def verdict(self, posterior: np.ndarray, label: int, sides: set[int]) -> int | str:
        """A unit's winning side, or why it is dropped; ``sides``: those its votes took."""
        if not separates(posterior):
            return "no-majority"
        side = int(label)
        if side == 0:
            return "tie"
        if side not in sides:  # the model overrode every vote on this unit: no strength
            return "no-supporting-vote"
        return side

    def drops(self, drops: DropLog) -> None:
        """Log what :meth:`decide` over every unit would drop, in its order (the units'
        sides: those of all their votes)."""
        code = self.drop_code
        for k, key in enumerate(self.keys()):
            why = int(code[k])
            if why:
                drops.drop("aggregation", DROP_REASONS[why], key.split(UNIT_SEP, 1)[0])

    def _rows_of(self, units: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The posterior rows and modes of ``units`` (distinct, in first-appearance order)."""
        found = self.votes.calls.get(call_digest(units))
        if found is not None and found[1] == len(units):
            return self.store.read(found[0], found[1])
        # not a call of pass 0 (a subset of a chunk, say): each unit by its key
        if self._index is None:
            self._index = {}
            for key, seq in self.votes.merged():
                self._index.setdefault(key, seq)
        rows = [self.store.read(self._index[unit], 1) for unit in units]
        return (
            np.concatenate([r[0] for r in rows]),
            np.concatenate([r[1] for r in rows]),
        )

    def decide(self, votes: Iterable[PairVote], drops: DropLog | None = None) -> list[ResolvedPair]:
        by_unit: dict[str, list[PairVote]] = {}
        for v in votes:
            by_unit.setdefault(unit_key(v), []).append(v)
        if not by_unit:
            return []
        order = list(by_unit)
        posteriors, labels = self._rows_of(order)
        at = {unit: i for i, unit in enumerate(order)}
        out: list[ResolvedPair] = []
        for unit in sorted(by_unit):  # the keys' order: the fit's (rank) order
            i, vs = at[unit], by_unit[unit]
            item_id, lo, hi = unit.split(UNIT_SEP)
            posterior = posteriors[i]
            side = self.verdict(posterior, int(labels[i]), {_sign(v.score) for v in vs})
            if isinstance(side, str):
                if drops is not None:
                    drops.drop("aggregation", side, item_id)
                continue
            strengths = [abs(v.score) for v in vs if _sign(v.score) == side]
            pair = resolved_pair(
                item_id, lo, hi, side, vs, strengths, agreement=float(np.max(posterior))
            )
            if pair.strength is not None:
                pair = replace(
                    pair, strength=pair.strength * posterior_gap(posterior, self.classes, side)
                )
            out.append(pair)
        return out


class _SeqStore:
    """Per unit sequence number, its posterior row (K floats) and mode: appended in order,
    then read by ranges; on a file of ``spill`` when there is one, else in memory."""

    def __init__(self, spill: Spill | None, k: int) -> None:
        self.k = k
        self.spill = spill
        self.post_parts: list[np.ndarray] = []
        self.label_parts: list[np.ndarray] = []
        self.post_path: Path | None = None
        self.label_path: Path | None = None
        if spill is not None:
            self.post_path = spill.file("ds-posteriors.f8")
            self.label_path = spill.file("ds-labels.i1")
            self.post_path.touch()
            self.label_path.touch()
        self.posteriors = np.empty((0, k))
        self.labels = np.empty(0, dtype=np.int8)

    def append(self, posteriors: np.ndarray, labels: np.ndarray) -> None:
        if self.post_path is None or self.label_path is None:
            self.post_parts.append(posteriors)
            self.label_parts.append(labels)
            return
        with self.post_path.open("ab") as f:
            np.ascontiguousarray(posteriors, dtype=np.float64).tofile(f)
        with self.label_path.open("ab") as f:
            np.ascontiguousarray(labels, dtype=np.int8).tofile(f)

    def close_writing(self) -> None:
        if self.post_path is None:
            k = self.k
            self.posteriors = (
                np.concatenate(self.post_parts) if self.post_parts else np.empty((0, k))
            )
            self.labels = (
                np.concatenate(self.label_parts) if self.label_parts else np.empty(0, np.int8)
            )
            self.post_parts, self.label_parts = [], []

    def read(self, first: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self.post_path is None or self.label_path is None:
            return self.posteriors[first : first + n], self.labels[first : first + n]
        k = self.k
        posteriors = np.fromfile(
            self.post_path, dtype=np.float64, count=n * k, offset=first * k * 8
        )
        labels = np.fromfile(self.label_path, dtype=np.int8, count=n, offset=first)
        return posteriors.reshape(n, k), labels


def posterior_gap(posterior: np.ndarray, classes: np.ndarray, side: int) -> float:
    """P(winning side) - P(the other side): the share of the raters' strength the export keeps.

    The exported margin is the expected signed preference under the posterior when each side is
    as strong as the winning votes say (a tie 0): ``median strength x (P(win) - P(lose))``. A
    unit the model is sure of keeps the raters' strength; one it barely separates keeps little.
    """
    p = dict(zip(classes.tolist(), posterior.tolist(), strict=True))
    return round(float(p.get(side, 0.0) - p.get(-side, 0.0)), 6)


def separates(posterior: np.ndarray, margin: float = POSTERIOR_MARGIN) -> bool:
    """True when the largest posterior exceeds every other by at least ``margin``."""
    if len(posterior) < 2:  # one class observed in the whole project: nothing to separate from
        return True
    top, second = np.sort(posterior)[-2:][::-1]
    return bool(top - second >= margin)


aggregate_pairwise_dawid_skene.margin = (  # type: ignore[attr-defined]
    f"Dawid-Skene posterior of the winning side at least {POSTERIOR_MARGIN} above every other side "
    f"(raters with fewer than {MIN_LABELS} labels share one confusion matrix); strength = median "
    "winning strength x (P(winning side) - P(other side))"
)

AGGREGATORS: dict[str, PairAggregator] = {
    "majority": aggregate_pairwise,
    "dawid-skene": aggregate_pairwise_dawid_skene,
}
