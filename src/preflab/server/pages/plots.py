"""Geometry of the dashboard's plots, drawn by ``templates/_plots.html`` as inline SVG (no script,
no CDN: the page's CSP allows neither). Each function maps data to pixel coordinates and axis
ticks; the template only draws. Undefined values (None / NaN) are left out of a plot, never drawn
as 0.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np

WIDTH, HEIGHT = 460, 240
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 26, 34

#: Krippendorff (2004, *Content Analysis*, 2nd ed., §11.3.4): alpha >= 0.800 for reliable data,
#: 0.667 the lowest for tentative conclusions.
ALPHA_THRESHOLDS = (0.667, 0.8)


def _ok(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: round(a + (v - lo) / span * (b - a), 1)


def _frame(
    xlo: float,
    xhi: float,
    ylo: float,
    yhi: float,
    xticks: list[float],
    yticks: list[float],
    xfmt: str = "%g",
    yfmt: str = "%g",
) -> dict[str, Any]:
    sx, sy = _scale(xlo, xhi, LEFT, WIDTH - RIGHT), _scale(ylo, yhi, HEIGHT - BOTTOM, TOP)
    return {
        "sx": sx,
        "sy": sy,
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": HEIGHT - BOTTOM,
        "xticks": [{"x": sx(t), "label": xfmt % t} for t in xticks],
        "yticks": [{"y": sy(t), "label": yfmt % t} for t in yticks],
    }


def labels_over_time(per_day: list[tuple[str, int]]) -> dict[str, Any] | None:
    """Cumulative labels per day, as a line with a point per day."""
    if not per_day:
        return None
    total, points = 0, []
    for day, n in per_day:
        total += n
        points.append((day, total))
    hi = max(1, total)
    frame = _frame(0, max(1, len(points) - 1), 0, hi, [], [0, hi / 2, hi], yfmt="%.0f")
    sx, sy = frame.pop("sx"), frame.pop("sy")
    dots = [{"x": sx(i), "y": sy(v), "label": d, "value": v} for i, (d, v) in enumerate(points)]
    frame["xticks"] = [{"x": dots[0]["x"], "label": points[0][0]}] + (
        [{"x": dots[-1]["x"], "label": points[-1][0]}] if len(dots) > 1 else []
    )
    return {**frame, "dots": dots, "path": " ".join(f"{d['x']},{d['y']}" for d in dots)}


def agreement_intervals(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Krippendorff's alpha per batch and dimension with its CI: a point and a whisker per row,
    reference lines at the field's thresholds."""
    rows = [r for r in rows if _ok(r.get("alpha"))]
    if not rows:
        return None
    lo = min(0.0, *(r["low"] for r in rows if _ok(r.get("low"))))
    lo = math.floor(max(-1.0, lo) * 4) / 4
    height = TOP + BOTTOM + 24 * len(rows)
    sx = _scale(lo, 1.0, 150, WIDTH - RIGHT)
    out = []
    for i, r in enumerate(rows):
        y = TOP + 12 + 24 * i
        low, high = (
            (r["low"] if _ok(r.get("low")) else r["alpha"]),
            (r["high"] if _ok(r.get("high")) else r["alpha"]),
        )
        out.append(
            {
                "label": f"{r['batch']} · {r['dimension']}",
                "y": y,
                "x": sx(r["alpha"]),
                "x1": sx(low),
                "x2": sx(high),
                "value": r["alpha"],
                "low": low,
                "high": high,
            }
        )
    ticks = [t for t in (-1, -0.5, 0, 0.5, 1) if t >= lo]
    return {
        "width": WIDTH,
        "height": height,
        "top": TOP,
        "bottom": height - BOTTOM,
        "rows": out,
        "xticks": [{"x": sx(t), "label": f"{t:g}"} for t in ticks],
        "refs": [{"x": sx(t), "label": f"{t:g}"} for t in ALPHA_THRESHOLDS],
    }


def accuracy_vs_volume(raters: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Each rater's gold accuracy (production gold, else qualification) with its Wilson interval,
    against the number of labels they submitted."""
    pts = []
    for r in raters:
        gold = r.get("gold") or {}
        g = next(
            (gold[p] for p in ("production", "qualification") if (gold.get(p) or {}).get("n")), None
        )
        if g is None or not _ok(g.get("accuracy")):
            continue
        pts.append((r["username"], int(r.get("submitted") or 0), g))
    if not pts:
        return None
    xhi = max(1, *(n for _, n, _ in pts))
    frame = _frame(0, xhi, 0, 1, [0, xhi / 2, xhi], [0, 0.5, 1], xfmt="%.0f")
    sx, sy = frame.pop("sx"), frame.pop("sy")
    dots = [
        {
            "x": sx(n),
            "y": sy(g["accuracy"]),
            "y1": sy(g["wilson"][0]),
            "y2": sy(g["wilson"][1]),
            "label": name,
            "value": g["accuracy"],
            "n": n,
            "gold_n": g["n"],
        }
        for name, n, g in pts
    ]
    return {**frame, "dots": dots}


#: a column of word lengths: a list, or a numpy column (the snapshot's)
Lengths = Sequence[float] | np.ndarray


def length_bias_curve(
    chosen: Lengths, rejected: Lengths, logistic: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Share of answers chosen against their length ratio to the other answer (log2 bins, each
    pair counted from both sides, so the curve is symmetric about 1:1), with the fitted logistic
    curve ``sigmoid(slope * ln ratio)`` when there is one. Flat at 0.5: no length preference.
    ``chosen``/``rejected``: lists or numpy columns; each distinct (chosen, rejected) pair is
    binned once with its count (a few MB for the report's 500,000-pair sample, not a tuple a side)."""
    if len(chosen) != len(rejected):
        raise ValueError(f"{len(chosen)} chosen lengths but {len(rejected)} rejected")
    c = np.asarray(chosen, dtype=np.float64)
    r = np.asarray(rejected, dtype=np.float64)
    keep = (c > 0) & (r > 0) & (c != r)
    if not keep.any():
        return None
    pairs, times = np.unique(np.stack([c[keep], r[keep]], axis=1), axis=0, return_counts=True)
    del c, r, keep
    edges = [-3 + 0.5 * k for k in range(13)]
    chose = [0] * 12  # per bin: the sides chosen, and all sides
    sides = [0] * 12
    for (c_len, r_len), n in zip(pairs.tolist(), times.tolist(), strict=True):
        x = math.log2(c_len / r_len)
        for v, y in ((x, 1), (-x, 0)):
            k = bisect_right(edges, max(-3, min(v, 2.999))) - 1
            sides[k] += n
            chose[k] += y * n
    frame = _frame(-3, 3, 0, 1, [-3, -2, -1, 0, 1, 2, 3], [0, 0.5, 1])
    sx, sy = frame.pop("sx"), frame.pop("sy")
    frame["xticks"] = [
        {**t, "label": f"×{2**v:g}"} for t, v in zip(frame["xticks"], range(-3, 4), strict=True)
    ]
    dots = []
    for k, (a, b) in enumerate(zip(edges, edges[1:], strict=False)):
        if sides[k]:
            share = chose[k] / sides[k]
            dots.append(
                {
                    "x": sx((a + b) / 2),
                    "y": sy(share),
                    "value": share,
                    "n": sides[k],
                    "label": f"×{2**a:.2g}–{2**b:.2g}",
                }
            )
    fit = None
    if logistic and _ok(logistic.get("slope")):
        slope = logistic["slope"]
        pts = [
            (x / 10, 1 / (1 + math.exp(-slope * (x / 10) * math.log(2)))) for x in range(-30, 31)
        ]
        fit = " ".join(f"{sx(x)},{sy(p)}" for x, p in pts)
    return {**frame, "dots": dots, "fit": fit, "half": sy(0.5)}
