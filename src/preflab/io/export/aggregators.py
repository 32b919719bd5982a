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

from collections.abc import Iterable
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
    units = [f"{v.item_id}\x1f{v.lo}\x1f{v.hi}" for v in votes]
    signs = [int((v.score > 0) - (v.score < 0)) for v in votes]
    # Only the classes that occur: an unused class (e.g. no rater ever said "tie") gives EM a
    # degenerate direction to absorb probability mass into.
    # "first better" and "second better" are sides of a canonical order (sorted ids) that says
    # nothing about the answers: the model is symmetric under swapping them (``mirror``).
    classes = sorted({*signs, *(-s for s in signs)})
    result = dawid_skene(units, [v.rater for v in votes], signs, classes=classes, mirror=MIRROR)
    by_unit: dict[str, list[PairVote]] = {}
    for unit, v in zip(units, votes, strict=True):
        by_unit.setdefault(unit, []).append(v)
    out: list[ResolvedPair] = []
    for unit, posterior, label in zip(
        result.units.tolist(), result.posteriors, result.labels.tolist(), strict=True
    ):
        vs = by_unit[unit]
        item_id, lo, hi = unit.split("\x1f")
        if not separates(posterior):
            if drops is not None:
                drops.drop("aggregation", "no-majority", item_id)
            continue
        side = int(label)
        if side == 0:
            if drops is not None:
                drops.drop("aggregation", "tie", item_id)
            continue
        strengths = [abs(v.score) for v in vs if (v.score > 0) - (v.score < 0) == side]
        if not strengths:  # the model overrode every vote on this unit: no strength to report
            if drops is not None:
                drops.drop("aggregation", "no-supporting-vote", item_id)
            continue
        pair = resolved_pair(
            item_id, lo, hi, side, vs, strengths, agreement=float(np.max(posterior))
        )
        if pair.strength is not None:
            pair = replace(
                pair, strength=pair.strength * posterior_gap(posterior, result.classes, side)
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
