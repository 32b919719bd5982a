"""The statistics the server needs, from the quality engine (:mod:`preflab.quality.gold`).

Imported lazily: the quality package pulls in numpy/scipy (seconds at start-up), and only
gold submissions need it. The server adds no statistics of its own beyond the rolling rule
below, which is the quality engine's Wilson interval applied to the last ``window`` outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

Decision = Literal["pass", "fail", "continue"]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927); ``(0, 1)`` when ``n == 0``."""
    if n == 0:
        return (0.0, 1.0)
    from ..quality.gold import wilson_interval as wilson

    return wilson(successes, n, confidence)


def qualification_decision(
    correct: Sequence[bool], bar: float, min_items: int, confidence: float
) -> Decision:
    """``pass`` once the Wilson lower bound clears ``bar`` (after ``min_items``); ``fail`` once
    the upper bound is below it; else ``continue`` (see :func:`preflab.quality.gold.qualification_decision`)."""
    from ..quality.gold import qualification_decision as decide

    return decide(list(correct), bar=min(bar, 0.999999), min_items=min_items, confidence=confidence)


def final_qualification(correct: Sequence[bool], bar: float, min_items: int) -> Decision:
    """The qualification set ran out undecided: pass on the point estimate, given enough answers."""
    n = len(correct)
    if n < min_items or n == 0:
        return "fail"
    return "pass" if sum(bool(c) for c in correct) / n >= bar else "fail"


def drift_alarm(
    recent: Sequence[bool], bar: float, min_items: int, confidence: float
) -> dict[str, Any] | None:
    """Evidence when the rolling gold accuracy is credibly below ``bar`` (Wilson upper bound of
    the last ``len(recent)`` outcomes < bar), else ``None``. The CUSUM path of
    :func:`preflab.quality.gold.cusum_drift` is attached to the evidence when it applies."""
    n = len(recent)
    if n < min_items:
        return None
    k = sum(bool(c) for c in recent)
    lo, hi = wilson_interval(k, n, confidence)
    if hi >= bar:
        return None
    evidence: dict[str, Any] = {
        "rule": "rolling_wilson_upper_below_bar",
        "n": n,
        "correct": k,
        "accuracy": k / n,
        "wilson": [lo, hi],
        "confidence": confidence,
        "bar": bar,
        "outcomes": [bool(c) for c in recent],
    }
    if 0 < bar < 0.95:
        from ..quality.gold import cusum_drift

        p0 = min(0.99, bar + (1 - bar) / 2)
        evidence["cusum"] = cusum_drift(list(recent), p0=p0, p1=bar).as_dict()
    return _plain(evidence)


def _plain(value: Any) -> Any:
    """numpy scalars to Python numbers, so the evidence stores as JSON."""
    import json

    return json.loads(
        json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    )
