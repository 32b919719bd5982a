"""The statistics the server needs, taken from :mod:`preflab.quality` when it has them.

Thin adapter: the quality engine (another branch) owns the Wilson interval, the qualification
rule and drift detection. Until those land, the small fallbacks below keep the server working;
they follow the same definitions so swapping is a no-op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

Decision = Literal["pass", "fail", "continue"]

try:  # pragma: no cover - depends on the quality branch
    from ..quality import wilson_interval as _q_wilson  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _q_wilson = None
try:  # pragma: no cover
    from ..quality import qualification_decision as _q_decision  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _q_decision = None


def _z(confidence: float) -> float:
    """Two-sided normal quantile for ``confidence`` (Acklam-free: via math.erf inversion)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927, JASA 22:209).

    >>> lo, hi = wilson_interval(8, 10, 0.95); round(lo, 4), round(hi, 4)
    (0.4902, 0.9433)
    """
    if _q_wilson is not None:
        return tuple(_q_wilson(successes, n, confidence))  # type: ignore[return-value]
    if n == 0:
        return (0.0, 1.0)
    z = _z(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def qualification_decision(correct: Sequence[bool], bar: float, min_items: int, confidence: float) -> Decision:
    """``pass`` once the Wilson lower bound clears ``bar``; ``fail`` once the upper bound is below it."""
    if _q_decision is not None:
        return _q_decision(correct, bar, min_items, confidence)
    n = len(correct)
    if n < min_items:
        return "continue"
    lo, hi = wilson_interval(sum(bool(c) for c in correct), n, confidence)
    if lo >= bar:
        return "pass"
    if hi < bar:
        return "fail"
    return "continue"


def final_qualification(correct: Sequence[bool], bar: float, min_items: int) -> Decision:
    """When the qualification set is exhausted undecided: pass on the point estimate."""
    n = len(correct)
    if n < min_items or n == 0:
        return "fail"
    return "pass" if sum(bool(c) for c in correct) / n >= bar else "fail"


def drift_alarm(
    recent: Sequence[bool], bar: float, min_items: int, confidence: float
) -> dict | None:
    """Evidence dict when the rolling gold accuracy is credibly below ``bar``, else ``None``.

    Rolling-window rule: the Wilson upper bound of the last ``len(recent)`` outcomes < bar.
    """
    n = len(recent)
    if n < min_items:
        return None
    k = sum(bool(c) for c in recent)
    lo, hi = wilson_interval(k, n, confidence)
    if hi < bar:
        return {
            "rule": "rolling_wilson_upper_below_bar",
            "n": n,
            "correct": k,
            "accuracy": k / n,
            "wilson": [lo, hi],
            "confidence": confidence,
            "bar": bar,
            "outcomes": [bool(c) for c in recent],
        }
    return None
