"""Preference-aware agreement over the long label table, per batch and per dimension.

Each judgment kind's dimensions get the measurement level that fits them:

==============  ===============  =========================================================
kind            dimension        level
==============  ===============  =========================================================
pairwise        ``winner``       nominal (-1 / 0 / 1: first better, tie, second better)
pairwise        ``strength``     ordinal (signed strength -3..3)
ranking         ``winner``       nominal, on the pairs a ranking induces
rubric          each dimension   ``Dimension.agreement_metric`` of its rubric (``metrics``)
unary           ``thumb``        nominal
steps           ``step_verdict`` ordinal (-1 / 0 / 1 per step)
steps           ``first_error``  nominal (index of the first wrong step; n_steps = none)
==============  ===============  =========================================================

Rubric dimensions without a declared metric are ``ordinal`` when all values are whole numbers
and ``interval`` otherwise. For each group :func:`agreement_summary` reports Krippendorff's alpha
with a unit-bootstrap interval, percent agreement and Gwet's AC1/AC2.

:func:`intransitive_triads` counts, per rater, the candidate triads of one item whose three
pairwise verdicts form a strict cycle (a > b > c > a). Rankings cannot be intransitive; pairwise
judgments over three or more candidates of an item can.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any

import numpy as np

from preflab.schema import Rubric

from ..table import LabelTable
from .cohen import Weights
from .gwet import gwet_ac
from .krippendorff import Level, as_level, krippendorff_alpha_ci
from .percent import percent_agreement

DEFAULT_LEVELS = {
    "winner": "nominal",
    "strength": "ordinal",
    "thumb": "nominal",
    "step_verdict": "ordinal",
    "first_error": "nominal",
}


def rubric_metrics(rubrics: Iterable[Rubric]) -> dict[str, str]:
    """``{dimension name: agreement metric}`` from rubrics (``Dimension.agreement_metric``)."""
    out: dict[str, str] = {}
    for rubric in rubrics:
        for dim in rubric.dimensions:
            out[dim.name] = dim.agreement_metric
    return out


def level_for(
    dimension: str, values: np.ndarray, metrics: Mapping[str, str] | None = None
) -> Level:
    if metrics and dimension in metrics:
        return as_level(metrics[dimension])
    if dimension in DEFAULT_LEVELS:
        return as_level(DEFAULT_LEVELS[dimension])
    finite = values[~np.isnan(values)]
    return "ordinal" if np.all(finite == np.round(finite)) else "interval"


def agreement_summary(
    table: LabelTable,
    metrics: Mapping[str, str] | None = None,
    rubrics: Iterable[Rubric] = (),
    n_boot: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per ``(batch, kind, dimension)``: alpha with CI, percent agreement, Gwet AC.

    ``metrics`` maps a dimension name to a level and overrides ``rubrics`` and the defaults.
    """
    levels = {**rubric_metrics(rubrics), **(metrics or {})}
    rows = []
    for batch, kind, dim in table.groups():
        sub = table.select(kind=kind, dimension=dim, batch=batch)
        level = level_for(dim, sub.values, levels)
        ci = krippendorff_alpha_ci(
            sub.units, sub.values, level, n_boot=n_boot, confidence=confidence, seed=seed
        )
        per_unit: defaultdict[Any, int] = defaultdict(int)
        for u in sub.units:
            per_unit[u] += 1
        gwet_w: Weights = (
            None if level == "nominal" else ("linear" if level == "ordinal" else "quadratic")
        )
        rows.append(
            {
                "batch": batch,
                "kind": kind,
                "dimension": dim,
                "level": level,
                "n_labels": int(len(sub)),
                "n_units": len(per_unit),
                "n_pairable_units": sum(1 for c in per_unit.values() if c >= 2),
                "n_raters": int(len(set(sub.raters.tolist()))),
                "alpha": ci.estimate,
                "alpha_low": ci.low,
                "alpha_high": ci.high,
                "percent_agreement": percent_agreement(sub.units, sub.values),
                "gwet_ac": gwet_ac(sub.units, sub.values, gwet_w),
            }
        )
    return rows


def _pair_candidates(unit: str) -> tuple[str, str, str]:
    item, _, pair = str(unit).rpartition("::")
    lo, _, hi = pair.partition("|")
    return item, lo, hi


def intransitive_triads(table: LabelTable) -> dict[Any, dict[str, float]]:
    """Per rater: candidate triads judged on all three pairs and how many are strict cycles.

    Uses ``winner`` rows (unit ``item::lo|hi``, value -1 = lo better, 1 = hi better, 0 tie).
    Triads containing a tie are counted in ``triads`` but never as intransitive.

    Returns ``{rater: {"triads", "intransitive", "rate"}}``.
    """
    sub = table.where(table.dimensions == "winner")
    prefs: dict[tuple[Any, str], dict[tuple[str, str], float]] = defaultdict(dict)
    for unit, rater, value in zip(sub.units, sub.raters, sub.values):
        if np.isnan(value):
            continue
        item, lo, hi = _pair_candidates(unit)
        prefs[(rater, item)][(lo, hi)] = value
    out: dict[Any, dict[str, float]] = defaultdict(lambda: {"triads": 0, "intransitive": 0})
    for (rater, _item), edges in prefs.items():
        cands = sorted({c for pair in edges for c in pair})
        stats = out[rater]
        if len(cands) < 3:
            continue
        for a, b, c in combinations(cands, 3):
            if (a, b) in edges and (b, c) in edges and (a, c) in edges:
                stats["triads"] += 1
                ab, bc, ac = edges[(a, b)], edges[(b, c)], edges[(a, c)]
                # a>b>c>a: ab=-1, bc=-1, ac=+1 ; a<b<c<a: ab=1, bc=1, ac=-1
                if (ab, bc, ac) in ((-1, -1, 1), (1, 1, -1)):
                    stats["intransitive"] += 1
    result = {}
    for rater, s in out.items():
        rate = s["intransitive"] / s["triads"] if s["triads"] else float("nan")
        result[rater] = {"triads": s["triads"], "intransitive": s["intransitive"], "rate": rate}
    return result
