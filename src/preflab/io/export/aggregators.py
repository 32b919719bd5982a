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

from array import array
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from ...quality.aggregation.dawid_skene import MIN_LABELS, dawid_skene
from .resolve import (
    DropLog,
    PairAggregator,
    PairVote,
    ResolvedPair,
    aggregate_pairwise,
    resolved_pair,
)

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
    """Every vote of an export as the fit's input, compact: a code per vote for its unit and
    its rater (first-appearance order), its side, and per unit the sides its votes took.

    Python objects only per distinct unit key and rater (one dict entry each); a vote costs
    9 bytes. (The fit used to take three lists of a vote's strings, which numpy turned into
    fixed-width unicode arrays, ~4 bytes a character a vote, and sorted: ~1 GB at 1M votes.)
    """

    def __init__(self) -> None:
        self.unit_code: dict[str, int] = {}
        self.rater_code: dict[str, int] = {}
        self.units = array("i")
        self.raters = array("i")
        self.signs = array("b")
        #: per unit code: bit ``side + 1`` set when one of its votes took ``side``
        self.masks = bytearray()

    def __len__(self) -> int:
        return len(self.signs)

    def add(self, votes: Iterable[PairVote]) -> None:
        unit_code, rater_code, masks = self.unit_code, self.rater_code, self.masks
        for v in votes:
            unit = unit_key(v)
            u = unit_code.get(unit)
            if u is None:
                u = unit_code[unit] = len(unit_code)
                masks.append(0)
            r = rater_code.get(v.rater)
            if r is None:
                r = rater_code[v.rater] = len(rater_code)
            sign = _sign(v.score)
            self.units.append(u)
            self.raters.append(r)
            self.signs.append(sign)
            masks[u] |= 1 << (sign + 1)

    def sides(self, unit: str) -> set[int]:
        mask = self.masks[self.unit_code[unit]]
        return {side for side in (-1, 0, 1) if mask >> (side + 1) & 1}


def _sorted_codes(names: dict[str, int]) -> tuple[np.ndarray, list[str]]:
    """``rank[code]``: each first-appearance code's place among the names sorted (the order
    ``np.unique`` gives the strings themselves), and the names in that order."""
    ordered = sorted(names)  # code point order, as numpy compares unicode
    rank = np.empty(len(ordered), dtype=np.int64)
    rank[[names[name] for name in ordered]] = np.arange(len(ordered), dtype=np.int64)
    return rank, ordered


class DawidSkeneFit:
    """The model fitted on every vote of an export (unit, rater, side of each): each unit's
    posterior and mode. :meth:`decide` resolves any subset of the units (a chunk of items of a
    streamed export) as :func:`aggregate_pairwise_dawid_skene` resolves them all.

    The fit runs on integer codes numbered in the sorted order of the unit keys and rater ids,
    so its design matrix, iterations and posteriors are those of the fit on the strings
    (numpy's sorted unique values). Held afterwards: the posteriors (a row of 2-3 floats a
    unit), each unit's mode, and the unit keys (``index``, the votes' dict renumbered in place:
    no second copy of the keys).
    """

    def __init__(self, votes: VoteColumns) -> None:
        # Only the classes that occur: an unused class (e.g. no rater ever said "tie") gives EM
        # a degenerate direction to absorb probability mass into.
        # "first better" and "second better" are sides of a canonical order (sorted ids) that
        # says nothing about the answers: the model is symmetric under swapping them (``mirror``).
        signs = np.frombuffer(votes.signs, dtype=np.int8).astype(np.int64)
        present = set(np.unique(signs).tolist())
        classes = sorted({*present, *(-s for s in present)})
        unit_rank, self.units = _sorted_codes(votes.unit_code)
        rater_rank, _ = _sorted_codes(votes.rater_code)
        units = unit_rank[np.frombuffer(votes.units, dtype=np.int32)]
        raters = rater_rank[np.frombuffer(votes.raters, dtype=np.int32)]
        result = dawid_skene(units, raters, signs, classes=classes, mirror=MIRROR)
        del units, raters, signs
        self.classes = result.classes
        self.posteriors = result.posteriors
        self.labels = result.labels.tolist()
        # the votes' unit dict, renumbered to the sorted order, serves as the index; the
        # masks follow it, so ``votes.sides`` still answers
        index = votes.unit_code
        for unit, code in index.items():
            index[unit] = int(unit_rank[code])
        masks = np.frombuffer(votes.masks, dtype=np.uint8).copy()
        ordered = np.empty_like(masks)
        ordered[unit_rank] = masks
        votes.masks[:] = ordered.tobytes()
        self.index = index

    def verdict(self, k: int, sides: set[int]) -> int | str:
        """Unit ``k``'s winning side, or why it is dropped; ``sides``: those its votes took."""
        if not separates(self.posteriors[k]):
            return "no-majority"
        side = int(self.labels[k])
        if side == 0:
            return "tie"
        if side not in sides:  # the model overrode every vote on this unit: no strength
            return "no-supporting-vote"
        return side

    def drops(self, sides: Callable[[str], set[int]], drops: DropLog) -> None:
        """Log what :meth:`decide` over every unit would drop, in its order (``sides(unit)``:
        the sides the unit's votes took)."""
        for k, unit in enumerate(self.units):
            why = self.verdict(k, sides(unit))
            if isinstance(why, str):
                drops.drop("aggregation", why, unit.split(UNIT_SEP, 1)[0])

    def decide(self, votes: Iterable[PairVote], drops: DropLog | None = None) -> list[ResolvedPair]:
        by_unit: dict[str, list[PairVote]] = {}
        for v in votes:
            by_unit.setdefault(unit_key(v), []).append(v)
        out: list[ResolvedPair] = []
        for unit in sorted(by_unit, key=self.index.__getitem__):
            k, vs = self.index[unit], by_unit[unit]
            item_id, lo, hi = unit.split(UNIT_SEP)
            side = self.verdict(k, {_sign(v.score) for v in vs})
            if isinstance(side, str):
                if drops is not None:
                    drops.drop("aggregation", side, item_id)
                continue
            posterior = self.posteriors[k]
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
