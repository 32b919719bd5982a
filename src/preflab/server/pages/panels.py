"""The dashboard's statistics panels, from the quality report (agreement with CIs per batch and
dimension, agreement with consensus, position and length bias, the label set they measured), with
the geometry of their charts. Computed by the quality snapshot
(:mod:`preflab.server.snapshot`), outside any request for a project of any size."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...quality.labels import LABEL_SET_RULE
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
    report: Mapping[str, Any],
    chosen: plots.Lengths | None = None,
    rejected: plots.Lengths | None = None,
) -> dict[str, Any]:
    """The panels of a quality report (:func:`preflab.quality.report.report_from_items`, the
    very figures ``preflab quality report`` prints): agreement per batch and dimension with CIs,
    agreement with consensus per rater, position and length bias with their charts, and the
    label set they measured. ``chosen``/``rejected``: the word lengths of the decided pairs the
    length figures were measured on (the accumulator keeps them, sampled above its bound), for
    the share-chosen curve."""
    out: dict[str, Any] = {
        "available": True,
        "agreement": [],
        "consensus": {},
        "position": None,
        "length": None,
        "label_set": report.get("label_set") or {"rule": LABEL_SET_RULE},
    }
    try:
        out["agreement"] = [
            {
                "batch": a["batch"],
                "kind": a["kind"],
                "dimension": a["dimension"],
                "alpha": a["alpha"],
                "low": a["alpha_low"],
                "high": a["alpha_high"],
                "labels": a["n_labels"],
            }
            for a in report.get("agreement") or []
        ]
        out["consensus"] = {
            rater: {"agreement": f.get("consensus_agreement"), "n": f.get("consensus_n") or 0}
            for rater, f in (report.get("raters") or {}).items()
            if "consensus_n" in f
        }
        pb = report.get("position_bias")
        if pb:
            out["position"] = {
                **pb,
                "chart": svg_bars(
                    [(r, v["share"]) for r, v in pb["per_rater"].items()]
                    + [("overall", pb["overall"]["share"])],
                    ref=0.5,
                ),
            }
        lb = report.get("length_bias")
        if lb and lb.get("n_pairs"):
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
                "curve": plots.length_bias_curve(
                    [] if chosen is None else chosen,
                    [] if rejected is None else rejected,
                    lb.get("logistic"),
                ),
            }
    except Exception as exc:  # a panel failing must not take the dashboard down
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out
