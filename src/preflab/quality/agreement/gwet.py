"""Gwet's AC1 (nominal) and AC2 (weighted) agreement coefficients, any number of raters.

Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the presence of high
agreement. *British Journal of Mathematical and Statistical Psychology* 61, 29-48; and Gwet,
K. L. (2014). *Handbook of Inter-Rater Reliability*, 4th ed., chapter 2 (formulas for missing
ratings and weights).

With ``r_ik`` raters putting unit ``i`` in category ``k``, ``r_i = sum_k r_ik``,
``r*_ik = sum_l w_kl r_il`` and weights ``w`` (identity for AC1):

    p_a = mean over units with r_i >= 2 of sum_k r_ik (r*_ik - 1) / (r_i (r_i - 1))
    pi_k = mean over units with r_i >= 1 of r_ik / r_i
    p_e = T_w / (q (q - 1)) * sum_k pi_k (1 - pi_k)      (T_w = sum of all weights)
    AC = (p_a - p_e) / (1 - p_e)

Worked example (Gwet 2008's "kappa paradox": two raters agree on 118 of 125 units, almost all
in one category; kappa is about -0.02 while AC1 stays high)::

    >>> y1 = [1] * 118 + [1] * 5 + [2] * 2
    >>> y2 = [1] * 118 + [2] * 5 + [1] * 2
    >>> units = list(range(125)) * 2
    >>> round(gwet_ac(units, y1 + y2), 4)
    0.9408
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .fleiss import category_counts


def gwet_weights(
    categories: np.ndarray, weights: Literal["linear", "quadratic"] | None
) -> np.ndarray:
    """Agreement weights over category *values* (1 on the diagonal), Gwet (2014) table 3.6."""
    c = np.asarray(categories, dtype=float)
    if weights is None:
        return np.eye(len(c))
    span = c.max() - c.min() if len(c) > 1 else 1.0
    diff = np.abs(c[:, None] - c[None, :]) / span
    if weights == "linear":
        result: np.ndarray = 1.0 - diff
        return result
    if weights == "quadratic":
        result = 1.0 - diff**2
        return result
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def gwet_ac(
    units: Any,
    values: Any,
    weights: Literal["linear", "quadratic"] | None = None,
    categories: Any = None,
) -> float:
    """AC1 (``weights=None``) or AC2 (``"linear"`` / ``"quadratic"``) from a long table.

    ``categories`` fixes the category set ``q`` (by default the values that occur).
    """
    table, _, cats = category_counts(units, values)
    if categories is not None:
        cats_full = np.asarray(sorted(set(np.asarray(categories, float))), float)
        missing = set(cats) - set(cats_full)
        if missing:
            raise ValueError(
                f"values {sorted(missing)} are not among categories {cats_full.tolist()}"
            )
        full = np.zeros((len(table), len(cats_full)))
        full[:, np.searchsorted(cats_full, cats)] = table
        table, cats = full, cats_full
    q = len(cats)
    r_i = table.sum(axis=1)
    if q < 2:
        # Every rating in one category: perfect agreement, AC = 1.0 by the reference's convention
        # (irrCAC, Gwet's package: gwet.ac1.raw / Python irrcac 0.4.4 CAC.gwet() give 1.0).
        return 1.0 if (r_i >= 2).any() else float("nan")
    w = gwet_weights(cats, weights)
    starred = table @ w.T
    paired = r_i >= 2
    if not paired.any():
        return float("nan")
    t = table[paired]
    ri = r_i[paired]
    p_a = float(((t * (starred[paired] - 1)).sum(axis=1) / (ri * (ri - 1))).mean())
    rated = r_i >= 1
    pi_k = (table[rated] / r_i[rated, None]).mean(axis=0)
    p_e = float(w.sum() / (q * (q - 1)) * (pi_k * (1 - pi_k)).sum())
    if p_e >= 1:
        return float("nan")
    return (p_a - p_e) / (1 - p_e)
