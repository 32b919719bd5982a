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
that never lost (or never won), or more generally a comparison graph that is not strongly
connected (Ford 1957, see :func:`mle_exists`), has no finite unique ML strength; the fit then
reports ``converged=False``. Use ``l2 > 0`` for such data.

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

from ..table import as_array, factorize

ARENA_SCALE = 400.0 / np.log(10.0)

# Newton stops once no strength moves by more than this (natural-log units). Its convergence is
# quadratic, so the remaining error is far below the last step; 1e-9 is ~2e-7 Elo points.
FIT_TOL = 1e-9
# Bootstrap replicates stop once their estimated optimisation error is below 1% of the smallest
# standard error (1 / sqrt(H_kk) at the full fit, which never exceeds an item's actual standard
# error). A percentile bound from B replicates has a Monte-Carlo error of about
# sqrt(0.025 * 0.975 / B) / phi(1.96) standard errors: 0.27 at B = 100, 0.085 at B = 1000, so
# an optimisation error 10-30x smaller cannot move a reported bound.
BOOT_TOL_SE = 0.01


def arena_ratings(strengths: Any, base: float = 1000.0) -> np.ndarray:
    result: np.ndarray = base + ARENA_SCALE * np.asarray(strengths, dtype=float)
    return result


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
    boot_unconverged: int = (
        0  # bootstrap replicates cut off at the iteration cap (see bradley_terry)
    )

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
            out["boot_unconverged"] = self.boot_unconverged
        return out


def aggregate_pairs(
    first: np.ndarray, second: np.ndarray, score: np.ndarray, n_items: int
) -> PairCounts:
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
    pc = PairCounts(
        n_items, pi, pj, np.empty(0), np.empty(0), cell_pair, 1.0 - cat / 2.0, counts.astype(float)
    )
    pc.w, pc.n = pc.weights(pc.cell_count)
    return pc


def _pcg(
    matvec: Callable[[np.ndarray], np.ndarray],
    b: np.ndarray,
    dinv: np.ndarray,
    rtol: float,
    maxiter: int,
    centre: bool,
) -> np.ndarray:
    """Conjugate gradients for ``H x = b`` with the Jacobi preconditioner ``dinv = 1 / diag(H)``.

    Hand-written rather than ``scipy.sparse.linalg.cg`` because without ``l2`` H is singular
    (shifting all strengths changes nothing) and b sums to zero: CG converges on such a
    consistent system, but rounding would let x drift along the constant vector over many
    iterations, so with ``centre`` the preconditioned residual is kept mean-zero (a projected
    Jacobi preconditioner). It also stops quietly on non-positive curvature instead of raising.
    """
    x = np.zeros_like(b)
    r = b.copy()
    z = dinv * r
    if centre:
        z -= z.mean()
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
        if centre:
            z -= z.mean()
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return x


class _Newton:
    """Damped Newton on the loss for one fixed set of pairs, any pair weights ``(w, n)``.

    The Hessian is the weighted graph Laplacian (+ ``l2 I``) with edge weights
    ``n p (1 - p)``. Its sparsity pattern, the upper triangle in CSR form (the pairs' ``(i, j)``
    sort order is CSR order), is built once and shared by the full fit and every bootstrap
    replicate; each Newton step only refills the values.
    """

    def __init__(self, pc: PairCounts, l2: float) -> None:
        self.i, self.j, self.m, self.l2 = pc.i, pc.j, pc.n_items, l2
        indptr = np.r_[0, np.cumsum(np.bincount(pc.i, minlength=self.m))]
        self.upper = sparse.csr_matrix((np.zeros(len(pc.i)), pc.j, indptr), shape=(self.m, self.m))
        self.upper_t = self.upper.T  # a CSC view sharing upper.data

    def p(self, s: np.ndarray) -> np.ndarray:
        """P(i beats j) per pair."""
        from scipy.special import expit  # imported on use: not by every export (~0.3 s CPU)

        result: np.ndarray = expit(s[self.i] - s[self.j])
        return result

    def solve(
        self,
        w: np.ndarray,
        n: np.ndarray,
        s: np.ndarray,
        tol: float,
        maxiter: int = 100,
        p: np.ndarray | None = None,
    ) -> tuple[np.ndarray, bool, int]:
        """Minimise from ``s`` (``p`` = ``self.p(s)`` if known): ``(s, converged, iterations)``.

        ``tol`` bounds the estimated remaining error of every strength (natural-log units).
        """
        i, j, m, l2, upper, upper_t = self.i, self.j, self.m, self.l2, self.upper, self.upper_t
        # the gradient is expected minus observed score per item; the observed part is fixed
        observed = np.bincount(i, weights=w, minlength=m) + np.bincount(
            j, weights=n - w, minlength=m
        )
        lin = None

        def gradient(s: np.ndarray, p: np.ndarray) -> np.ndarray:
            expected_i = n * p
            grad = np.bincount(i, weights=expected_i, minlength=m) + np.bincount(
                j, weights=n - expected_i, minlength=m
            )
            return grad - observed + l2 * s

        def loss(s: np.ndarray, p: np.ndarray) -> float:
            # -[w log p + (n - w) log(1 - p)] = -n log p + (n - w)(s_i - s_j) as log(1 - p) = log p - d,
            # and sum (n - w)(s_i - s_j) = lin @ s. log(expit) is ~3x faster than log_expit; its floor
            # matters only beyond |d| > 690.
            nonlocal lin
            if lin is None:  # most solves never evaluate the loss
                lin = np.bincount(i, weights=n - w, minlength=m) - np.bincount(
                    j, weights=n - w, minlength=m
                )
            return float(lin @ s - n @ np.log(np.maximum(p, 1e-300)) + 0.5 * l2 * (s @ s))

        s = np.array(s, dtype=float)
        p = self.p(s) if p is None else p
        grad = gradient(s, p)
        f = None  # the loss costs a log per pair: computed only when a step needs checking
        previous = np.inf  # size of the last full Newton step
        for it in range(1, maxiter + 1):
            c = n * p * (1.0 - p)
            upper.data[:] = c
            diag = (
                np.bincount(i, weights=c, minlength=m) + np.bincount(j, weights=c, minlength=m) + l2
            )
            # an item without comparisons (possible with ``items=``) has a zero row: leave it alone
            dinv = np.divide(1.0, diag, out=np.zeros(m), where=diag > 0)

            def hess(v: np.ndarray, diag: np.ndarray = diag) -> np.ndarray:
                result: np.ndarray = diag * v - upper @ v - upper_t @ v
                return result

            # Inexact Newton: max |g_k| / H_kk is about the size of the step still to go; solving to
            # that relative accuracy keeps convergence quadratic while early solves stay cheap.
            rtol = min(0.1, max(1e-10, float(np.max(np.abs(grad) * dinv, initial=0.0))))
            step = _pcg(hess, -grad, dinv, rtol, maxiter=min(m, 1000), centre=l2 == 0)
            slope = float(grad @ step)
            # Full-step certificate: d/dd log(p (1 - p)) = 1 - 2p lies in [-1, 1], so along the
            # step a pair's curvature c grows at most like c e^{tau |a|} (a = step_i - step_j).
            # Integrating twice, loss(s + step) <= loss(s) + slope + sum c (e^|a| - 1 - |a|)
            # <= loss(s) + slope + g(max |a|) sum c a^2, with g(x) = (e^x - 1 - x) / x^2 rising
            # from 1/2. When that already shows sufficient decrease (always near the optimum, and
            # usually on a bootstrap replicate's first step) the loss, a log per pair, is skipped.
            da = step[i] - step[j]
            amax = float(np.max(np.abs(da), initial=0.0))
            g = (np.expm1(amax) - amax) / amax**2 if amax > 1e-4 else 0.5 + amax / 6
            bound = g * float(c @ (da * da)) + 0.5 * l2 * float(step @ step)
            if amax < 20 and slope + bound <= 1e-4 * slope:
                t = 1.0
                s = s + step
                p = f = None  # computed below unless this was the last step
            else:  # backtracking (Armijo) line search
                f = loss(s, p) if f is None else f
                t = 1.0
                for _ in range(40):
                    trial = s + t * step
                    p_trial = self.p(trial)
                    f_trial = loss(trial, p_trial)
                    # the second term absorbs rounding in a sum over ~10^6 terms once steps are tiny
                    if f_trial <= f + 1e-4 * t * slope + 1e-12 * abs(f):
                        break
                    t *= 0.5
                s, p, f = trial, p_trial, f_trial
            # Stop when the error left is below tol. After a full Newton step it is about
            # C * size^2 (quadratic convergence), and C can be read off the last two steps:
            # C ~ size / previous^2. Damped steps give no such estimate, so size itself must be < tol.
            size = t * float(np.max(np.abs(step), initial=0.0))
            if size < tol or (
                t == 1.0 and size < previous < np.inf and size**3 < tol * previous**2
            ):
                return s, True, it
            previous = size if t == 1.0 else np.inf
            p = self.p(s) if p is None else p
            grad = gradient(s, p)
        return s, False, maxiter


def mle_exists(pc: PairCounts) -> bool:
    """Whether the unpenalised ML strengths are finite and unique up to a shift.

    Ford, L. R. (1957), Solution of a ranking problem from binary comparisons, *American
    Mathematical Monthly* 64(8): exactly when, however the items are split in two, some item of
    each part has beaten (or tied) some item of the other, i.e. when the directed graph
    "j -> i if i scored against j" is strongly connected.
    """
    fwd, back = pc.w > 0, pc.n - pc.w > 0
    rows = np.concatenate([pc.j[fwd], pc.i[back]])
    cols = np.concatenate([pc.i[fwd], pc.j[back]])
    graph = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(pc.n_items, pc.n_items)
    )
    from scipy.sparse.csgraph import connected_components  # imported on use, as expit

    return bool(connected_components(graph, directed=True, connection="strong")[0] == 1)


def _codes(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Positions of ``values`` in the sorted ``labels``; unknown values are an error."""
    if values.dtype.kind in "iu" and labels.dtype.kind in "iu" and len(labels) and len(values):
        lo, hi = (
            min(int(values.min()), int(labels.min())),
            max(int(values.max()), int(labels.max())),
        )
        if lo >= 0 and hi < 4 * len(values) + 1024:  # small ids: a lookup table beats a search
            lookup = np.full(hi + 1, -1, dtype=np.int64)
            lookup[labels] = np.arange(len(labels))
            codes = lookup[values]
            if (codes < 0).any():
                raise ValueError(
                    f"items {np.unique(values[codes < 0])[:5].tolist()} are not among items"
                )
            result: np.ndarray = codes
            return result
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
    collapsed pairs; each replicate warm-starts from the full fit). ``boot_unconverged`` counts
    replicates without a finite MLE (in practice): if it is more than a few percent of
    ``n_boot``, the intervals of the items that go unbeaten or winless in resamples are really
    unbounded on that side; fit with ``l2 > 0`` instead.
    """
    a = as_array(first, "first")
    b = as_array(second, "second", len(a))
    score = (
        np.ones(len(a)) if outcome is None else as_array(outcome, "outcome", len(a), dtype=float)
    )
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
    won = np.bincount(pc.i, weights=pc.w, minlength=n_items) + np.bincount(
        pc.j, weights=pc.n - pc.w, minlength=n_items
    )
    played = np.bincount(pc.i, weights=pc.n, minlength=n_items) + np.bincount(
        pc.j, weights=pc.n, minlength=n_items
    )
    start = np.log((won + 0.5) / (played - won + 0.5))
    newton = _Newton(pc, l2)
    s, ok, nit = newton.solve(pc.w, pc.n, start - start.mean(), FIT_TOL)
    if l2 == 0:
        s = s - s.mean()
        # Without a finite MLE Newton walks an unbeaten item off to infinity until the gradient
        # underflows, which can look like convergence: check the data, not the iterates.
        ok = ok and mle_exists(pc)
    result = BTResult(labels, s, arena_ratings(s), len(a), ok, nit)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        probs = pc.cell_count / pc.cell_count.sum()
        p_hat = newton.p(s)  # every replicate starts at s, so its pair probabilities are shared
        c_hat = pc.n * p_hat * (1 - p_hat)
        info = (
            np.bincount(pc.i, weights=c_hat, minlength=n_items)
            + np.bincount(pc.j, weights=c_hat, minlength=n_items)
            + l2
        )
        tol = BOOT_TOL_SE / np.sqrt(info.max()) if info.max() > 0 else FIT_TOL
        boots = np.empty((n_boot, n_items))
        for t in range(n_boot):
            w, n = pc.weights(rng.multinomial(len(a), probs).astype(float))
            # Without l2, an item missing from a replicate keeps its warm start (nothing moves it).
            # From the warm start Newton settles in 3-5 steps when the replicate has a finite MLE;
            # one that has not settled in 10 almost always has none (an item unbeaten or winless
            # in the resample) and would only walk that item further off, so stop and count it.
            boots[t], ok_t, _ = newton.solve(w, n, s, tol, maxiter=10, p=p_hat)
            result.boot_unconverged += not ok_t
            if l2 == 0:
                boots[t] -= boots[t].mean()
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(arena_ratings(boots), [tail, 100 - tail], axis=0)
        result.low, result.high = lo, hi
    return result


def comparisons_from_winner_rows(
    units: Any, values: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
