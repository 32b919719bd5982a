"""Bradley-Terry strengths from pairwise comparisons, by maximum likelihood.

Bradley, R. A. and Terry, M. E. (1952). Rank analysis of incomplete block designs I.
*Biometrika* 39(3/4), 324-345. Ties count as half a win for each side (Rao and Kupper's
simplest convention, as in Chatbot Arena's ``compute_mle_elo``).

    P(i beats j) = sigmoid(s_i - s_j)
    loss(s) = -sum_pairs [w_ij log sigmoid(s_i - s_j) + (n_ij - w_ij) log sigmoid(s_j - s_i)]
              + l2 / 2 * ||s||^2

Comparisons are first aggregated per unordered pair; the loss and its analytic gradient then
cost two ``bincount`` calls, and scipy's L-BFGS finds the optimum. Strengths are centred (mean
0): without ``l2`` they are defined only up to a shift, and an item that never lost (or never
won) has no finite ML strength; use ``l2 > 0`` for such data.

Arena-style ratings are ``1000 + 400 / ln(10) * s`` (an Elo scale: 400 points = 10:1 odds).

Worked example (choix documentation example, winner first)::

    >>> fit = bradley_terry([0, 0, 1, 2], [1, 1, 2, 0])
    >>> [round(float(x), 6) for x in fit.strengths]
    [0.419618, -0.419618, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from ..table import as_array, factorize

ARENA_SCALE = 400.0 / np.log(10.0)


def arena_ratings(strengths: Any, base: float = 1000.0) -> np.ndarray:
    return base + ARENA_SCALE * np.asarray(strengths, dtype=float)


@dataclass
class PairCounts:
    """Comparisons aggregated per unordered pair ``i < j``: ``w`` = wins of ``i`` (ties 1/2)."""

    i: np.ndarray
    j: np.ndarray
    w: np.ndarray
    n: np.ndarray
    row_pair: np.ndarray  # pair index of each input comparison (for resampling)
    row_score: np.ndarray  # 1, 0.5 or 0: the input comparison's score for pair side i


@dataclass
class BTResult:
    items: np.ndarray
    strengths: np.ndarray
    ratings: np.ndarray
    n_comparisons: int
    converged: bool
    n_iter: int
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "items": self.items.tolist(),
            "strengths": self.strengths.tolist(),
            "ratings": self.ratings.tolist(),
            "n_comparisons": self.n_comparisons,
            "converged": self.converged,
        }
        if self.low is not None and self.high is not None:
            out["ratings_low"] = self.low.tolist()
            out["ratings_high"] = self.high.tolist()
        return out


def aggregate_pairs(first: np.ndarray, second: np.ndarray, score: np.ndarray, n_items: int) -> PairCounts:
    """Aggregate per pair when the pair space is small next to the data (a few models, many
    votes); otherwise keep one row per comparison, which saves a sort and costs nothing."""
    if n_items * n_items > 4 * len(first):
        rows = np.arange(len(first))
        return PairCounts(first, second, score.astype(float), np.ones(len(first)), rows, score.astype(float))
    swap = first > second
    i = np.where(swap, second, first)
    j = np.where(swap, first, second)
    s = np.where(swap, 1.0 - score, score)
    key = i * n_items + j
    present = np.zeros(n_items * n_items, dtype=bool)
    present[key] = True
    uniq = np.flatnonzero(present)
    inv = (np.cumsum(present) - 1)[key]
    w = np.bincount(inv, weights=s, minlength=len(uniq))
    n = np.bincount(inv, minlength=len(uniq)).astype(float)
    return PairCounts(uniq // n_items, uniq % n_items, w, n, inv, s)


def _loss_grad(s: np.ndarray, pc: PairCounts, w: np.ndarray, n: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    d = s[pc.i] - s[pc.j]
    # w log sig(d) + (n - w) log sig(-d) = n log sig(d) - (n - w) d, since log sig(-d) = log sig(d) - d
    sig = expit(d)
    # log(expit) is ~3x faster than log_expit; the floor only matters beyond |d| > 690
    loss = -(n @ np.log(np.maximum(sig, 1e-300)) - (n - w) @ d) + 0.5 * l2 * (s @ s)
    r = w - n * sig  # d loss / d d = -r
    m = len(s)
    grad = np.bincount(pc.j, weights=r, minlength=m) - np.bincount(pc.i, weights=r, minlength=m) + l2 * s
    return float(loss), grad


def fit_pairs(
    pc: PairCounts, n_items: int, l2: float = 0.0, w: np.ndarray | None = None, n: np.ndarray | None = None,
    x0: np.ndarray | None = None, gtol: float = 1e-8, maxiter: int = 2000,
) -> tuple[np.ndarray, bool, int]:
    w = pc.w if w is None else w
    n = pc.n if n is None else n
    scale = max(float(n.sum()), 1.0)  # keep the objective O(1) so tolerances mean the same at any size

    # Diagonal preconditioning: optimise x = sqrt(h) * s with h ~ the Hessian diagonal
    # (n_i / 4 per item), so L-BFGS sees a well-scaled problem and needs few evaluations.
    h = (np.bincount(pc.i, weights=n, minlength=n_items) + np.bincount(pc.j, weights=n, minlength=n_items)) / 4
    root = np.sqrt((h + l2 + 1e-3) / scale)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = _loss_grad(x / root, pc, w, n, l2)
        return loss / scale, grad / scale / root

    x = np.zeros(n_items) if x0 is None else x0 * root
    res = minimize(fun, x, jac=True, method="L-BFGS-B", options={"gtol": gtol, "ftol": 0.0, "maxiter": maxiter, "maxcor": 20})
    s = res.x / root
    s = s - (s.mean() if l2 == 0 else 0.0)
    return s, bool(res.success), int(res.nfev)


def bradley_terry(
    first: Any,
    second: Any,
    outcome: Any = None,
    l2: float = 0.0,
    n_boot: int = 0,
    confidence: float = 0.95,
    seed: int | None = 0,
    items: Any = None,
) -> BTResult:
    """Fit strengths from comparisons ``first[k]`` vs ``second[k]``.

    ``outcome[k]`` is the score of ``first[k]``: 1 win, 0.5 tie, 0 loss (default all 1, i.e.
    ``first`` is the winner). ``items`` fixes the item set (default: those that occur).
    With ``n_boot > 0``, percentile intervals of the arena ratings from resampling comparisons
    (each replicate warm-starts from the full fit).
    """
    a = as_array(first, "first")
    b = as_array(second, "second", len(a))
    score = np.ones(len(a)) if outcome is None else as_array(outcome, "outcome", len(a), dtype=float)
    if not np.isin(score, (0.0, 0.5, 1.0)).all():
        raise ValueError("outcome must be 1 (first wins), 0.5 (tie) or 0 (second wins)")
    if (a == b).any():
        raise ValueError(f"{int((a == b).sum())} comparisons compare an item with itself")
    if items is None:
        codes, labels = factorize(np.concatenate([a, b]))
    else:
        labels = np.unique(np.asarray(items))
        codes = np.searchsorted(labels, np.concatenate([a, b]))
    n_items = len(labels)
    pc = aggregate_pairs(codes[: len(a)], codes[len(a) :], score, n_items)
    s, ok, nit = fit_pairs(pc, n_items, l2)
    result = BTResult(labels, s, arena_ratings(s), len(a), ok, nit)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        boots = np.empty((n_boot, n_items))
        for t in range(n_boot):
            mult = np.bincount(rng.integers(0, len(a), len(a)), minlength=len(a)).astype(float)
            w = np.bincount(pc.row_pair, weights=mult * pc.row_score, minlength=len(pc.i))
            n = np.bincount(pc.row_pair, weights=mult, minlength=len(pc.i))
            boots[t], _, _ = fit_pairs(pc, n_items, l2, w, n, x0=s, gtol=1e-5)
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(arena_ratings(boots), [tail, 100 - tail], axis=0)
        result.low, result.high = lo, hi
    return result


def comparisons_from_winner_rows(units: Any, values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``winner`` rows of the label table (unit ``item::lo|hi``, -1 lo better, 1 hi better, 0 tie)
    as ``(first, second, outcome)`` arrays over candidate ids, ready for :func:`bradley_terry`."""
    vals = as_array(values, "values", dtype=float)
    us = as_array(units, "units", len(vals))
    keep = ~np.isnan(vals)
    lo, hi = [], []
    for unit in us[keep]:
        pair = str(unit).rpartition("::")[2]
        x, _, y = pair.partition("|")
        lo.append(x)
        hi.append(y)
    outcome = (1.0 - vals[keep]) / 2.0  # -1 -> 1 (lo wins), 0 -> 0.5, 1 -> 0
    return np.array(lo, dtype=object), np.array(hi, dtype=object), outcome
