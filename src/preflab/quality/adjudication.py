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

from collections import defaultdict
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


def _entropy(values: np.ndarray) -> float:
    _, counts = np.unique(values, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def disagreement_scores(table: LabelTable) -> list[dict[str, Any]]:
    """One row per labelled unit (steps grouped by candidate): ``item_id``, ``unit``, ``kind``,
    ``n_labels`` and the scores that apply to it."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    item_of: dict[tuple[str, str], str] = {}
    for unit, item, kind, dim, val in zip(
        table.units, table.items, table.kinds, table.dimensions, table.values
    ):
        if np.isnan(val):
            continue
        key_unit = str(unit).rsplit("::step", 1)[0] if dim == "step_verdict" else str(unit)
        key = (str(kind), key_unit)
        groups[key][f"{dim}@{unit}" if dim == "step_verdict" else str(dim)].append(float(val))
        item_of[key] = str(item)
    rows = []
    for (kind, unit), dims in sorted(groups.items()):
        row: dict[str, Any] = {"item_id": item_of[(kind, unit)], "unit": unit, "kind": kind}
        n = max(len(v) for v in dims.values())
        row["n_labels"] = n
        if "winner" in dims:
            row["winner_entropy"] = _entropy(np.array(dims["winner"]))
        if "strength" in dims:
            row["strength_spread"] = float(np.std(dims["strength"]))
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
        rows.append(row)
    return rows


def route_for_adjudication(
    table: LabelTable, settings: AdjudicationSettings | None = None
) -> list[dict[str, Any]]:
    """Units whose disagreement crosses a threshold: each row has ``reasons`` such as
    ``"winner_entropy 1.58 > 0.90"``; sorted by the number of reasons, then the scores."""
    cfg = settings or AdjudicationSettings()
    limits = {
        "winner_entropy": cfg.max_winner_entropy,
        "strength_spread": cfg.max_strength_spread,
        "rubric_spread": cfg.max_rubric_spread,
        "step_disagreement": cfg.max_step_disagreement,
    }
    out = []
    for row in disagreement_scores(table):
        if row["n_labels"] < cfg.min_labels:
            continue
        reasons = [
            f"{k} {row[k]:.2f} > {lim:.2f}"
            for k, lim in limits.items()
            if k in row and row[k] > lim
        ]
        if reasons:
            out.append({**row, "reasons": reasons})
    out.sort(key=lambda r: (-len(r["reasons"]), -sum(r.get(k, 0) for k in limits)))
    return out
