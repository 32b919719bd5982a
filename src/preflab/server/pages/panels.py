"""The dashboard's statistics panels, from :mod:`preflab.quality` (agreement with CIs per
batch and dimension, agreement with consensus, position and length bias, the label set they
measured), with the geometry of their charts. Computed by the quality snapshot
(:mod:`preflab.server.snapshot`), outside any request for a project of any size."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from ...quality.agreement import krippendorff_alpha_ci
from ...quality.bias import length_bias, position_bias
from ...quality.gold import leave_one_out_agreement
from ...quality.labels import LABEL_SET_RULE
from ...quality.table import LabelTable
from ...schema import PairwiseJudgment
from . import plots

#: room right of the longest bar for its value label ("1.00", "1,234")
VALUE_W = 52
#: fewer decided pairs with different lengths than this: no logistic slope (its interval from
#: 5 pairs read [-10,887, 11,036]); the dashboard says "too few pairs" instead
MIN_SLOPE_PAIRS = 30


def svg_bars(
    values: list[tuple[str, float]],
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    ref: float | None = None,
    width: int = 420,
    bar_h: int = 22,
) -> dict[str, Any]:
    """Geometry for a horizontal bar chart drawn by the template as inline SVG (no scripts).
    A full bar leaves ``VALUE_W`` for its value label (a "24" at the end was cut to "2")."""
    label_w = 140
    plot_w = width - label_w - VALUE_W
    bars = []
    for i, (label, v) in enumerate(values):
        frac = 0.0 if v is None or math.isnan(v) else max(0.0, min(1.0, (v - lo) / (hi - lo)))
        bars.append(
            {
                "label": label,
                "value": v,
                "x": label_w,
                "y": 8 + i * (bar_h + 6),
                "w": round(frac * plot_w, 1),
                "h": bar_h,
            }
        )
    ref_x = None if ref is None else label_w + (ref - lo) / (hi - lo) * plot_w
    return {
        "bars": bars,
        "width": width,
        "height": 16 + len(values) * (bar_h + 6),
        "ref_x": ref_x,
        "label_w": label_w,
    }


def quality_panels(
    judgments: list[Any],
    batch_of: dict[str, str],
    lengths: Mapping[tuple[str, str | None], int] | None = None,
    label_set: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Agreement per batch and dimension with CIs, agreement with consensus, length and position
    bias, from :mod:`preflab.quality`; ``label_set`` says which labels they measured
    (:meth:`preflab.quality.labels.LabelSet.describe`), printed on the dashboard."""
    out: dict[str, Any] = {
        "available": True,
        "agreement": [],
        "consensus": {},
        "position": None,
        "length": None,
        "label_set": label_set or {"rule": LABEL_SET_RULE},
    }
    try:
        table = LabelTable.from_judgments(judgments, batches=batch_of)
        for batch, kind, dim in table.groups():
            sub = table.select(kind=kind, dimension=dim, batch=batch)
            level: Literal["nominal", "ordinal"] = (
                "ordinal" if dim in ("strength", "first_error") else "nominal"
            )
            ci = krippendorff_alpha_ci(sub.units, sub.values, level=level, n_boot=200)
            out["agreement"].append(
                {
                    "batch": batch,
                    "kind": kind,
                    "dimension": dim,
                    "alpha": ci.estimate,
                    "low": ci.low,
                    "high": ci.high,
                    "labels": len(sub),
                }
            )
        main = (
            table.select(dimension="winner")
            if "winner" in set(table.dimensions.tolist())
            else table
        )
        if len(main):
            out["consensus"] = leave_one_out_agreement(main.units, main.raters, main.values)
        pairwise = [j for j in judgments if isinstance(j, PairwiseJudgment)]
        if pairwise:
            pb = position_bias(pairwise)
            out["position"] = {
                **pb,
                "chart": svg_bars(
                    [(r, v["share"]) for r, v in pb["per_rater"].items()]
                    + [("overall", pb["overall"]["share"])],
                    ref=0.5,
                ),
            }
            decided = [j for j in pairwise if j.chosen is not None]
            if lengths and decided:
                chosen = [lengths.get((j.item_id, j.chosen), 0) for j in decided]
                rejected = [lengths.get((j.item_id, j.rejected), 0) for j in decided]
                lb = length_bias(chosen, rejected)
                hist = lb.get("ratio_histogram") or []
                edges = [2 ** (-3 + 0.25 * k) for k in range(len(hist) + 1)]
                # Coarse bins (x0.25 .. x8) keep the chart readable; the JSON API has the full detail.
                coarse = [
                    (f"x{edges[k]:.2g}-{edges[k + 4]:.2g}", sum(hist[k : k + 4]))
                    for k in range(0, len(hist), 4)
                ]
                out["length"] = {
                    **lb,
                    "chart": svg_bars(coarse, hi=max([1, *(v for _, v in coarse)])),
                    "curve": plots.length_bias_curve(chosen, rejected, lb.get("logistic")),
                }
    except Exception as exc:  # a panel failing must not take the dashboard down
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out
