"""Percent (observed) agreement.

For a unit with ``m`` labels, its agreement is the share of ordered rater pairs that gave the
same value, ``sum_c n_c (n_c - 1) / (m (m - 1))``; the table's agreement is the mean over units
with two or more labels (the ``P`` of Fleiss 1971). With two raters this is the share of units
where they agree.

>>> percent_agreement(["u1", "u1", "u2", "u2"], [1, 1, 1, 0])
0.5
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .fleiss import category_counts


def unit_agreement(units: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit pairwise agreement (NaN for units with one label) and the unit labels."""
    table, labels, _ = category_counts(units, values)
    m = table.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        agree = (table * (table - 1)).sum(axis=1) / (m * (m - 1))
    agree[m < 2] = np.nan
    return agree, labels


def percent_agreement(units: Any, values: Any) -> float:
    """Mean pairwise agreement over units with at least two labels (NaN if there are none)."""
    agree, _ = unit_agreement(units, values)
    agree = agree[~np.isnan(agree)]
    return float(agree.mean()) if len(agree) else float("nan")


def unanimous_share(units: Any, values: Any) -> tuple[int, int]:
    """``(unanimous units, units with two or more labels)``."""
    agree, _ = unit_agreement(units, values)
    agree = agree[~np.isnan(agree)]
    return int((agree == 1).sum()), int(len(agree))
