"""The pieces of preflab's self-contained HTML reports (inline SVG, no network): escaping, cell
formatting, tables, bar and histogram charts. The quality report (:mod:`.report`) and the reward
model's evaluation report (``preflab.train.report``) draw with them."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

#: the style of a report page (:func:`html_page`)
PAGE_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}th{background:#eee}"
)


def escape(x: Any) -> str:
    """Text as HTML, quotes included (every piece of model output and every id is untrusted).

    >>> escape('<b title="x">')
    '&lt;b title=&quot;x&quot;&gt;'
    """
    return html.escape(str(x), quote=True)


def fmt(x: Any, nd: int = 3) -> str:
    """A table cell: ``–`` for nothing, a float to ``nd`` places, anything else escaped.

    >>> fmt(None), fmt(0.12345), fmt("<a>")
    ('–', '0.123', '&lt;a&gt;')
    """
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return escape(x)


def bar_svg(
    values: list[tuple[str, float, float | None, float | None]], lo: float = -0.2, hi: float = 1.0
) -> str:
    """Horizontal bars with optional CI whiskers, in [lo, hi]."""
    w, row, left = 520, 22, 220
    h = row * len(values) + 30

    def scale(v: float) -> float:
        return left + (w - left - 10) * (min(max(v, lo), hi) - lo) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">']
    zero = scale(0.0)
    parts.append(f'<line x1="{zero:.1f}" y1="0" x2="{zero:.1f}" y2="{h - 20}" stroke="#999"/>')
    for k, (label, v, a, b) in enumerate(values):
        y = k * row + 5
        parts.append(f'<text x="0" y="{y + 13}" font-size="11">{escape(label)[:40]}</text>')
        if v is None or not math.isfinite(v):
            continue
        x0, x1 = sorted((zero, scale(v)))
        parts.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1):.1f}" height="14" fill="#4a7ab5"/>'
        )
        if a is not None and b is not None:
            parts.append(
                f'<line x1="{scale(a):.1f}" y1="{y + 7}" x2="{scale(b):.1f}" y2="{y + 7}" stroke="#000"/>'
            )
    for t in axis_ticks(lo, hi):
        parts.append(
            f'<text x="{scale(t):.1f}" y="{h - 5}" font-size="10" text-anchor="middle">{t:.1f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def axis_ticks(lo: float, hi: float, step: float = 0.2) -> list[float]:
    """Ticks at whole multiples of ``step`` within ``[lo, hi]``, rounded (so ``0.0``, never the
    ``-0.0`` or uneven labels that ``linspace`` gives from a float step).

    >>> axis_ticks(-0.2, 1.0)
    [-0.2, 0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    """
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(k * step, 10) + 0.0 for k in range(first, last + 1)]


def hist_svg(counts: list[int], label: str) -> str:
    """Vertical bars of ``counts`` with a dashed line at the middle bin and a caption."""
    w, h = 520, 140
    m = max(counts) if counts and max(counts) > 0 else 1
    bw = (w - 20) / max(len(counts), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">']
    for k, c in enumerate(counts):
        bh = (h - 30) * c / m
        parts.append(
            f'<rect x="{10 + k * bw:.1f}" y="{h - 20 - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" fill="#b5744a"/>'
        )
    mid = 10 + bw * len(counts) / 2
    parts.append(
        f'<line x1="{mid:.1f}" y1="0" x2="{mid:.1f}" y2="{h - 20}" stroke="#333" stroke-dasharray="3"/>'
    )
    parts.append(f'<text x="10" y="{h - 5}" font-size="10">{escape(label)}</text></svg>')
    return "".join(parts)


def html_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A ``<table>`` with a header row; every cell through :func:`fmt`."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_page(title: str, body: Sequence[str]) -> str:
    """A whole page: ``title`` as its title and heading, then ``body``'s parts."""
    return "".join(
        [
            f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{PAGE_STYLE}</style></head><body><h1>{escape(title)}</h1>",
            *body,
            "</body></html>",
        ]
    )
