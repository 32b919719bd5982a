"""Bradley-Terry strengths from pairwise comparisons, by maximum likelihood.

Bradley, R. A. and Terry, M. E. (1952). Rank analysis of incomplete block designs I.
*Biometrika* 39(3/4), 324-345. Ties count as half a win for each side (Rao and Kupper's
simplest convention, as in Chatbot Arena's ``compute_mle_elo``).

    P(i beats j) = sigmoid(s_i - s_j)
    loss(s) = -sum_pairs [w_ij log sigmoid(s_i - s_j) + (n_ij - w_ij) log sigmoid(s_j - s_i)]
              + l2 / 2 * ||s||^2

Fitting. Comparisons are collapsed once into unique unordered pairs ``i < j`` with their counts,
so every later pass costs O(unique pairs), not O(comparisons). The gradient is "expected minus
observed score" per item (the quantity Hunter's MM algorithm balances; Hunter, D. R. (2004), MM
algorithms for generalized Bradley-Terry models, *Annals of Statistics* 32(1), 384-406), and the
Hessian is the graph Laplacian of the comparison graph with edge weights
``n_ij p_ij (1 - p_ij)`` (plus ``l2 I``). We take damped Newton steps, solving each Newton system
with Jacobi-preconditioned conjugate gradients on that sparse Laplacian: on comparison graphs
that are reasonably connected CG needs a handful of sparse products, and Newton converges in a
handful of steps from the log-odds start ``log((wins + 1/2) / (losses + 1/2))``.

Strengths are centred (mean 0): without ``l2`` they are defined only up to a shift, and an item
that never lost (or never won) has no finite ML strength (the fit then stops at the iteration
cap and reports ``converged=False``); use ``l2 > 0`` for such data.

Bootstrap. A replicate resamples the comparisons with replacement (Efron's nonparametric
bootstrap). That is a multinomial draw of ``N`` comparisons over the distinct
(pair, outcome) cells with probabilities proportional to their counts, so a replicate is a new
weight vector on the collapsed pairs and never a resampled copy of the input. Each replicate
warm-starts from the full-data MLE, which is within one sampling error of the replicate's
optimum, so two or three Newton steps reach it.

Arena-style ratings are ``1000 + 400 / ln(10) * s`` (an Elo scale: 400 points = 10:1 odds).

Worked example (choix documentation example, winner first)::

    >>> fit = bradley_terry([0, 0, 1, 2], [1, 1, 2, 0])
    >>> [round(float(x), 6) for x in fit.strengths]
    [0.419618, -0.419618, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.special import expit

from ..table import as_array, factorize

ARENA_SCALE = 400.0 / np.log(10.0)

# Newton stops once no strength moves by more than this (natural-log units). Its convergence is
# quadratic, so the remaining error is far below the last step; 1e-9 is ~2e-7 Elo points.
FIT_TOL = 1e-9
# Bootstrap replicates stop at 1e-5 (0.002 Elo points). The percentile bounds themselves carry a
# Monte-Carlo error of roughly 0.1-0.3 standard errors at a few hundred replicates (and a
# standard error is >= ~1 Elo point even with 10^5 comparisons per item), so optimisation error
# this small cannot move a reported bound.
BOOT_TOL = 1e-5


def arena_ratings(strengths: Any, base: float = 1000.0) -> np.ndarray:
    return base + ARENA_SCALE * np.asarray(strengths, dtype=float)


@dataclass
class PairCounts:
    """Comparisons collapsed per unordered pair ``i < j``, pairs sorted by ``(i, j)``.

    ``w`` = score of ``i`` (wins, ties 1/2), ``n`` = comparisons of the pair. For resampling, the
    distinct (pair, outcome) cells: ``cell_pair`` (index of the pair), ``cell_score`` (1, 0.5 or
    0 for side ``i``) and ``cell_count`` (how many input comparisons fell in the cell).
    """

    n_items: int
    i: np.ndarray
    j: np.ndarray
    w: np.ndarray
    n: np.ndarray
    cell_pair: np.ndarray
    cell_score: np.ndarray
    cell_count: np.ndarray

    def weights(self, cell_count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(w, n)`` per pair for other cell counts (a bootstrap replicate)."""
        m = len(self.i)
        return (
            np.bincount(self.cell_pair, weights=cell_count * self.cell_score, minlength=m),
            np.bincount(self.cell_pair, weights=cell_count, minlength=m),
        )


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
    """Collapse comparisons (integer codes, ``score`` of ``first``) to unique pairs and cells."""
    swap = first > second
    i = np.where(swap, second, first).astype(np.int64)
    j = np.where(swap, first, second).astype(np.int64)
    # outcome for side i: 0 = i won, 1 = tie, 2 = j won
    outcome = np.rint(2.0 * np.where(swap, score, 1.0 - score)).astype(np.int64)
    # One sort of a combined key yields the distinct cells and their counts. (A presence table
    # over all n_items^2 pairs would be cheaper per element but is 100 MB at 10^4 items.)
    cells, counts = np.unique((i * n_items + j) * 3 + outcome, return_counts=True)
    pair_key, cat = np.divmod(cells, 3)
    starts = np.ones(len(cells), dtype=bool)
    starts[1:] = pair_key[1:] != pair_key[:-1]
    cell_pair = np.cumsum(starts) - 1
    pi, pj = np.divmod(pair_key[starts], n_items)
    pc = PairCounts(n_items, pi, pj, np.empty(0), np.empty(0), cell_pair, 1.0 - cat / 2.0, counts.astype(float))
    pc.w, pc.n = pc.weights(pc.cell_count)
    return pc


def _pcg(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray, dinv: np.ndarray, rtol: float, maxiter: int) -> np.ndarray:
    """Conjugate gradients for ``H x = b`` with the Jacobi preconditioner ``dinv = 1 / diag(H)``.

    Hand-written rather than ``scipy.sparse.linalg.cg`` because H is singular without ``l2``
    (constant shifts): CG still converges on this consistent system, and here it stops on the
    preconditioned residual and gives up quietly on a non-positive curvature instead of raising.
    """
    x = np.zeros_like(b)
    r = b.copy()
    z = dinv * r
    p = z.copy()
    rz = r @ z
    stop = rtol * rtol * rz
    for _ in range(maxiter):
        if rz <= stop:
            break
        q = matvec(p)
        pq = p @ q
        if pq <= 0:
            break
        alpha = rz / pq
        x += alpha * p
        r -= alpha * q
        z = dinv * r
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return x


def _newton(
    pc: PairCounts, w: np.ndarray, n: np.ndarray, l2: float, s: np.ndarray, tol: float, maxiter: int = 100,
) -> tuple[np.ndarray, bool, int]:
    """Damped Newton from ``s`` for pair scores ``w`` out of ``n``: ``(s, converged, iterations)``."""
    i, j, m = pc.i, pc.j, pc.n_items
    # Everything that does not depend on s, computed once: observed scores (the gradient is
    # expected minus observed score), the linear part of the loss, and the Hessian's sparsity
    # pattern (upper triangle in CSR order, which is exactly the pairs' (i, j) sort order).
    observed = np.bincount(i, weights=w, minlength=m) + np.bincount(j, weights=n - w, minlength=m)
    lin = np.bincount(i, weights=n - w, minlength=m) - np.bincount(j, weights=n - w, minlength=m)
    upper = sparse.csr_matrix((np.zeros(len(i)), j, np.r_[0, np.cumsum(np.bincount(i, minlength=m))]), shape=(m, m))
    upper_t = upper.T  # a CSC view sharing upper.data

    def evaluate(s: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        p = expit(s[i] - s[j])
        # -[w log p + (n - w) log(1 - p)] = -n log p + (n - w)(s_i - s_j), since log(1 - p) =
        # log p - d. log(expit) is ~3x faster than log_expit; its floor matters only for |d| > 690.
        loss = lin @ s - n @ np.log(np.maximum(p, 1e-300)) + 0.5 * l2 * (s @ s)
        expected_i = n * p
        grad = np.bincount(i, weights=expected_i, minlength=m) + np.bincount(j, weights=n - expected_i, minlength=m)
        return float(loss), grad - observed + l2 * s, p

    s = s.astype(float, copy=True)
    loss, grad, p = evaluate(s)
    for it in range(1, maxiter + 1):
        # Hessian = weighted graph Laplacian (+ l2 I), edge weights n p (1 - p)
        c = n * p * (1.0 - p)
        upper.data[:] = c
        diag = np.bincount(i, weights=c, minlength=m) + np.bincount(j, weights=c, minlength=m) + l2
        # an item without comparisons (possible with ``items=``) has a zero row: leave it alone
        dinv = np.divide(1.0, diag, out=np.zeros(m), where=diag > 0)
        # Inexact Newton (Eisenstat-Walker style): solve loosely far from the optimum, tightly
        # near it; max |g_i| / H_ii is about the size of the Newton step.
        rtol = min(0.1, max(1e-12, float(np.sqrt(np.max(np.abs(grad) * dinv, initial=0.0)))))
        step = _pcg(lambda v: diag * v - upper @ v - upper_t @ v, -grad, dinv, rtol, maxiter=min(m, 1000))
        slope = float(grad @ step)
        t = 1.0
        for _ in range(40):  # backtracking line search (Armijo); full steps near the optimum
            trial = s + t * step
            new_loss, new_grad, new_p = evaluate(trial)
            # the second term absorbs rounding in a sum over ~10^6 terms once steps are tiny
            if new_loss <= loss + 1e-4 * t * slope + 1e-12 * abs(loss):
                break
            t *= 0.5
        s, loss, grad, p = trial, new_loss, new_grad, new_p
        if t * np.max(np.abs(step), initial=0.0) < tol:
            return s, True, it
    return s, False, maxiter


def _codes(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Positions of ``values`` in the sorted ``labels``; unknown values are an error."""
    if values.dtype.kind in "iu" and labels.dtype.kind in "iu" and len(labels) and len(values):
        lo, hi = min(int(values.min()), int(labels.min())), max(int(values.max()), int(labels.max()))
        if lo >= 0 and hi < 4 * len(values) + 1024:  # small ids: a lookup table beats a search
            lookup = np.full(hi + 1, -1, dtype=np.int64)
            lookup[labels] = np.arange(len(labels))
            codes = lookup[values]
            if (codes < 0).any():
                raise ValueError(f"items {np.unique(values[codes < 0])[:5].tolist()} are not among items")
            return codes
    codes = np.searchsorted(labels, values)
    bad = codes >= len(labels)
    bad[~bad] = labels[codes[~bad]] != values[~bad]
    if bad.any():
        raise ValueError(f"items {np.unique(values[bad])[:5].tolist()} are not among items")
    return codes.astype(np.int64)


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
    With ``n_boot > 0``, percentile intervals of the arena ratings from ``n_boot`` bootstrap
    replicates that resample the comparisons with replacement (multinomial weights on the
    collapsed pairs; each replicate warm-starts from the full fit).
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
        codes = _codes(np.concatenate([a, b]), labels)
    n_items = len(labels)
    pc = aggregate_pairs(codes[: len(a)], codes[len(a) :], score, n_items)

    # Start from the smoothed log-odds of each item's score: the right order of magnitude and
    # usually the right ranking, so Newton needs only a few (undamped) steps.
    won = np.bincount(pc.i, weights=pc.w, minlength=n_items) + np.bincount(pc.j, weights=pc.n - pc.w, minlength=n_items)
    played = np.bincount(pc.i, weights=pc.n, minlength=n_items) + np.bincount(pc.j, weights=pc.n, minlength=n_items)
    start = np.log((won + 0.5) / (played - won + 0.5))
    s, ok, nit = _newton(pc, pc.w, pc.n, l2, start - start.mean(), FIT_TOL)
    if l2 == 0:
        s = s - s.mean()
    result = BTResult(labels, s, arena_ratings(s), len(a), ok, nit)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        probs = pc.cell_count / pc.cell_count.sum()
        boots = np.empty((n_boot, n_items))
        for t in range(n_boot):
            w, n = pc.weights(rng.multinomial(len(a), probs).astype(float))
            # Items missing from a replicate keep the warm start (no information moves them).
            boots[t], _, _ = _newton(pc, w, n, l2, s, BOOT_TOL, maxiter=50)
            if l2 == 0:
                boots[t] -= boots[t].mean()
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
