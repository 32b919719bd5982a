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
    fit = DawidSkeneFit(
        [unit_key(v) for v in votes], [v.rater for v in votes], [_sign(v.score) for v in votes]
    )
    return fit.decide(votes, drops)


class DawidSkeneFit:
    """The model fitted on every vote of an export (unit, rater, side of each): each unit's
    posterior and mode. :meth:`decide` resolves any subset of the units (a chunk of items of a
    streamed export) as :func:`aggregate_pairwise_dawid_skene` resolves them all.

    Held: the posteriors (a row of 2-3 floats a unit) and the unit keys; the fit itself holds
    the votes as integer codes and one sparse design matrix while EM runs (its iterations need
    every vote, so the votes are read once into arrays, not again from the database for each).
    """

    def __init__(self, units: list[str], raters: list[str], signs: list[int]) -> None:
        # Only the classes that occur: an unused class (e.g. no rater ever said "tie") gives EM
        # a degenerate direction to absorb probability mass into.
        # "first better" and "second better" are sides of a canonical order (sorted ids) that
        # says nothing about the answers: the model is symmetric under swapping them (``mirror``).
        classes = sorted({*signs, *(-s for s in signs)})
        result = dawid_skene(units, raters, signs, classes=classes, mirror=MIRROR)
        self.classes = result.classes
        self.posteriors = result.posteriors
        self.labels = result.labels.tolist()
        self.units = result.units.tolist()
        self.index = {unit: k for k, unit in enumerate(self.units)}

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
