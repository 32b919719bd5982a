"""Item-level disagreement scores and routing to adjudication.

* ``winner_entropy``: Shannon entropy (bits) of the winner votes (-1/0/1) on a pair.
* ``strength_spread``: standard deviation of the signed strengths (-3..3) on a pair.
* ``rubric_spread``: largest range (max - min) over a candidate's rubric dimensions.
* ``step_disagreement``: share of steps whose verdicts are not unanimous, or a first-error
  disagreement.

:func:`route_for_adjudication` sends units above any threshold (with at least
``min_labels`` labels) to a senior reviewer, with the reasons.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .table import LabelTable


@dataclass
class AdjudicationSettings:
    max_winner_entropy: float = 0.9
    max_strength_spread: float = 1.5
    max_rubric_spread: float = 2.0
    max_step_disagreement: float = 0.0
    min_labels: int = 2


def population_std(values: Sequence[float]) -> float:
    """``np.std(values)``, bit for bit: under 8 values numpy's sum is a plain loop in order
    (its pairwise summation unrolls from 8 on), which this repeats without building an array (a
    unit of a few labels, once per unit of the report: ~16x faster). 8 values or more, or none:
    numpy itself."""
    n = len(values)
    if not 0 < n < 8:
        return float(np.std(values))
    total = 0.0
    for v in values:
        total += v
    mean = total / n
    squares = 0.0
    for v in values:
        squares += (v - mean) * (v - mean)
    return math.sqrt(squares / n)


def _entropy(values: Sequence[float]) -> float:
    counts: dict[float, int] = {}  # Counter's counts, without its constructor (once per unit)
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    total = len(values)
    return -sum(p * math.log2(p) for p in (counts[v] / total for v in sorted(counts)))


Groups = dict[tuple[str, str], dict[str, list[float]]]


def group_labels(
    units: Iterable[Any],
    items: Iterable[Any],
    kinds: Iterable[Any],
    dimensions: Iterable[Any],
    values: Iterable[float],
) -> tuple[Groups, dict[tuple[str, str], str]]:
    """Label values per ``(kind, unit)`` (steps grouped by candidate) and dimension, and the item
    of each: what :func:`unit_scores` scores."""
    groups: Groups = defaultdict(lambda: defaultdict(list))
    item_of: dict[tuple[str, str], str] = {}
    for unit, item, kind, dim, val in zip(units, items, kinds, dimensions, values):
        if math.isnan(val):
            continue
        key_unit = str(unit).rsplit("::step", 1)[0] if dim == "step_verdict" else str(unit)
        key = (str(kind), key_unit)
        groups[key][f"{dim}@{unit}" if dim == "step_verdict" else str(dim)].append(float(val))
        item_of[key] = str(item)
    return groups, item_of


def unit_scores(
    kind: str, unit: str, item_id: str, dims: Mapping[str, list[float]]
) -> dict[str, Any]:
    """The row of one labelled unit (see :func:`disagreement_scores`)."""
    row: dict[str, Any] = {"item_id": item_id, "unit": unit, "kind": kind}
    n = max(len(v) for v in dims.values())
    row["n_labels"] = n
    if "winner" in dims:
        row["winner_entropy"] = _entropy(dims["winner"])
    if "strength" in dims:
        row["strength_spread"] = population_std(dims["strength"])
    if kind == "rubric":
        spreads = [max(v) - min(v) for v in dims.values() if len(v) >= 2]
        if spreads:
            row["rubric_spread"] = float(max(spreads))
    steps = [v for d, v in dims.items() if d.startswith("step_verdict@")]
    if steps or "first_error" in dims:
        split = [len(set(v)) > 1 for v in steps if len(v) >= 2]
        fe = dims.get("first_error", [])
        score = float(np.mean(split)) if split else 0.0
        if len(set(fe)) > 1:
            score = max(score, 1.0)
        row["step_disagreement"] = score
    return row


def disagreement_scores(table: LabelTable) -> list[dict[str, Any]]:
    """One row per labelled unit (steps grouped by candidate): ``item_id``, ``unit``, ``kind``,
    ``n_labels`` and the scores that apply to it."""
    groups, item_of = group_labels(
        table.units, table.items, table.kinds, table.dimensions, table.values
    )
    return [
        unit_scores(kind, unit, item_of[(kind, unit)], dims)
        for (kind, unit), dims in sorted(groups.items())
    ]


LIMITS = ("winner_entropy", "strength_spread", "rubric_spread", "step_disagreement")


def reasons_for(row: Mapping[str, Any], settings: AdjudicationSettings | None = None) -> list[str]:
    """Why a unit's row goes to adjudication (empty: it does not)."""
    cfg = settings or AdjudicationSettings()
    if row["n_labels"] < cfg.min_labels:
        return []
    limits = {
        "winner_entropy": cfg.max_winner_entropy,
        "strength_spread": cfg.max_strength_spread,
        "rubric_spread": cfg.max_rubric_spread,
        "step_disagreement": cfg.max_step_disagreement,
    }
    return [
        f"{k} {row[k]:.2f} > {lim:.2f}" for k, lim in limits.items() if k in row and row[k] > lim
    ]


def queue_order(row: Mapping[str, Any]) -> tuple[int, float]:
    """Most reasons first, then the highest scores (ties: by kind and unit)."""
    return -len(row["reasons"]), -sum(row.get(k, 0) for k in LIMITS)


def route_for_adjudication(
    table: LabelTable, settings: AdjudicationSettings | None = None
) -> list[dict[str, Any]]:
    """Units whose disagreement crosses a threshold: each row has ``reasons`` such as
    ``"winner_entropy 1.58 > 0.90"``; sorted by the number of reasons, then the scores."""
    out = []
    for row in disagreement_scores(table):
        reasons = reasons_for(row, settings)
        if reasons:
            out.append({**row, "reasons": reasons})
    out.sort(key=queue_order)
    return out
