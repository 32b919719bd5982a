"""Cohen's kappa (unweighted, linear, quadratic) for two raters, per rater pair and averaged.

Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and Psychological
Measurement* 20(1). Weighted: Cohen, J. (1968). *Psychological Bulletin* 70(4).

    kappa = 1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij

with ``O`` the observed confusion table, ``E`` the product of its margins and ``w`` the
disagreement weights over category *positions* (0 on the diagonal; ``|i-j|`` linear,
``(i-j)^2`` quadratic), as in scikit-learn and statsmodels. Unweighted kappa is
``(p_o - p_e) / (1 - p_e)``.

Worked example (Artstein & Poesio 2008, Computational Linguistics 34(4), table 1)::

    >>> round(cohens_kappa_table([[20, 20], [10, 50]]), 6)  # 8/23
    0.347826
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Literal

import numpy as np

from ..table import as_array, factorize

Weights = Literal["linear", "quadratic"] | None


def _weight_matrix(k: int, weights: Weights) -> np.ndarray:
    idx = np.arange(k)
    diff = np.abs(idx[:, None] - idx[None, :]).astype(float)
    if weights is None:
        result: np.ndarray = (diff > 0).astype(float)
        return result
    if weights == "linear":
        result = diff
        return result
    if weights == "quadratic":
        result = diff**2
        return result
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def cohens_kappa_table(table: Any, weights: Weights = None) -> float:
    """Kappa of a square confusion table (rows rater 1, columns rater 2)."""
    obs = np.asarray(table, dtype=float)
    if obs.ndim != 2 or obs.shape[0] != obs.shape[1]:
        raise ValueError(f"a confusion table must be square, got shape {obs.shape}")
    total = obs.sum()
    if total <= 0:
        return float("nan")
    expected = np.outer(obs.sum(axis=1), obs.sum(axis=0)) / total
    w = _weight_matrix(len(obs), weights)
    denom = (w * expected).sum()
    if denom == 0:
        return float("nan")
    return float(1.0 - (w * obs).sum() / denom)


def confusion_table(y1: Any, y2: Any, labels: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Confusion table of two label vectors (rows pairs with a NaN are dropped) and its labels."""
    a = as_array(y1, "y1", dtype=float)
    b = as_array(y2, "y2", len(a), dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if labels is None:
        cats = np.unique(np.concatenate([a, b]))
    else:
        # The caller's order is kept (weights are by position, as in scikit-learn); a pair with
        # a value outside ``labels`` is left out of the table.
        cats = np.asarray(labels, float)
        if len(np.unique(cats)) != len(cats):
            raise ValueError(f"labels must be distinct, got {list(labels)}")
        known = np.isin(a, cats) & np.isin(b, cats)
        a, b = a[known], b[known]
    order = np.argsort(cats, kind="stable")
    ia = order[np.searchsorted(cats, a, sorter=order)]
    ib = order[np.searchsorted(cats, b, sorter=order)]
    k = len(cats)
    table = np.bincount(ia * k + ib, minlength=k * k).reshape(k, k).astype(float)
    return table, cats


def cohens_kappa(y1: Any, y2: Any, weights: Weights = None, labels: Any = None) -> float:
    """Kappa of two paired label vectors (NaN = missing; such pairs are dropped).

    Categories are the sorted union of both vectors unless ``labels`` is given; then they are
    taken in the given order (it matters to weighted kappa) and pairs outside them are dropped,
    as ``sklearn.metrics.cohen_kappa_score`` does.

    >>> cohens_kappa([0, 1, 1, 2], [0, 1, 2, 2])
    0.6363636363636364
    """
    table, _ = confusion_table(y1, y2, labels)
    return cohens_kappa_table(table, weights)


def pairwise_cohens_kappa(
    units: Any,
    raters: Any,
    values: Any,
    weights: Weights = None,
    min_overlap: int = 2,
) -> dict[tuple[Any, Any], dict[str, float]]:
    """Kappa, raw agreement and overlap for every rater pair sharing ``min_overlap`` units.

    Categories are those of the whole table, so pairs are comparable.
    Returns ``{(rater_a, rater_b): {"kappa", "agreement", "n"}}`` with ``rater_a < rater_b``.
    """
    vals = as_array(values, "values", dtype=float)
    n = len(vals)
    u_codes, _ = factorize(as_array(units, "units", n))
    r_codes, r_labels = factorize(as_array(raters, "raters", n))
    keep = ~np.isnan(vals)
    cats = np.unique(vals[keep])
    mat = np.full((len(r_labels), u_codes.max() + 1 if n else 0), np.nan)
    mat[r_codes[keep], u_codes[keep]] = vals[keep]
    rated = ~np.isnan(mat)
    overlap = rated.astype(np.int64) @ rated.T.astype(np.int64)
    out: dict[tuple[Any, Any], dict[str, float]] = {}
    for i, j in combinations(range(len(r_labels)), 2):
        if overlap[i, j] < min_overlap:
            continue
        both = rated[i] & rated[j]
        a, b = mat[i, both], mat[j, both]
        table, _ = confusion_table(a, b, cats)
        out[(r_labels[i], r_labels[j])] = {
            "kappa": cohens_kappa_table(table, weights),
            "agreement": float(np.mean(a == b)),
            "n": int(both.sum()),
        }
    return out


def mean_pairwise_kappa(
    units: Any, raters: Any, values: Any, weights: Weights = None, min_overlap: int = 2
) -> float:
    """Average of the pairwise kappas (Light 1971), weighted by nothing; NaN pairs are skipped."""
    pairs = pairwise_cohens_kappa(units, raters, values, weights, min_overlap)
    ks = np.array([p["kappa"] for p in pairs.values()], dtype=float)
    ks = ks[~np.isnan(ks)]
    return float(ks.mean()) if len(ks) else float("nan")
