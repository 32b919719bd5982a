"""Fleiss' kappa for many raters on nominal categories.

Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. *Psychological
Bulletin* 76(5), 378-382.

    P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)),  P = mean_i P_i,
    p_j = sum_i n_ij / sum_i n_i,                 P_e = sum_j p_j^2,
    kappa = (P - P_e) / (1 - P_e)

With the same number of raters per subject this is exactly Fleiss (1971); with varying numbers
(missing labels) each subject uses its own ``n_i`` and subjects with fewer than two labels are
dropped.

Worked example (two subjects, three raters, two categories)::

    >>> round(fleiss_kappa([[3, 0], [0, 3]]), 6)
    1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..table import as_array, factorize


def fleiss_kappa(counts: Any) -> float:
    """Kappa of a ``subjects x categories`` table of how many raters chose each category."""
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2:
        raise ValueError(f"counts must be a subjects x categories table, got shape {table.shape}")
    if (table < 0).any():
        raise ValueError("counts cannot be negative")
    n_i = table.sum(axis=1)
    table = table[n_i >= 2]
    n_i = n_i[n_i >= 2]
    if len(table) == 0:
        return float("nan")
    p_i = ((table**2).sum(axis=1) - n_i) / (n_i * (n_i - 1))
    p_j = table.sum(axis=0) / n_i.sum()
    p_e = float((p_j**2).sum())
    if p_e >= 1:
        return float("nan")
    return float((p_i.mean() - p_e) / (1 - p_e))


def category_counts(units: Any, values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``units x categories`` count table of a long table, with unit and category labels."""
    vals = as_array(values, "values", dtype=float)
    u = as_array(units, "units", len(vals))
    keep = ~np.isnan(vals)
    u_codes, u_labels = factorize(u[keep])
    c_codes, cats = factorize(vals[keep])
    k = len(cats)
    flat = np.bincount(u_codes * k + c_codes, minlength=len(u_labels) * k)
    return flat.reshape(len(u_labels), k).astype(float), u_labels, cats


def fleiss_kappa_long(units: Any, values: Any) -> float:
    """Fleiss' kappa straight from a long table (NaN values are missing)."""
    table, _, _ = category_counts(units, values)
    return fleiss_kappa(table)
