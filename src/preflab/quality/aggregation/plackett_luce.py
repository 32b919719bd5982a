"""Plackett-Luce strengths from full or partial rankings, by maximum likelihood.

Luce, R. D. (1959). *Individual Choice Behavior*; Plackett, R. L. (1975). The analysis of
permutations. *Applied Statistics* 24(2). Fitting as in Hunter, D. R. (2004), MM algorithms for
generalized Bradley-Terry models, *Annals of Statistics* 32(1) (here: L-BFGS on the same
likelihood with its analytic gradient).

A ranking ``r_1 > r_2 > ... > r_m`` (best first) has probability
``prod_t exp(s_{r_t}) / sum_{u >= t} exp(s_{r_u})``. Rankings are padded into one matrix so the
suffix sums (and the gradient ``chosen_i - sum_t [i in suffix t] P_t(i)``) are vectorised.
Strengths are centred; ``l2`` adds a ridge penalty. Ties are not modelled: pass strict rankings
(break or drop tied groups before calling).

>>> fit = plackett_luce([[0, 1, 2], [0, 2, 1], [1, 0, 2]])
>>> bool(fit.strengths[0] > fit.strengths[1] > fit.strengths[2])
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .bradley_terry import BTResult, arena_ratings


def plackett_luce(
    rankings: Sequence[Sequence[Any]], l2: float = 0.0, gtol: float = 1e-9
) -> BTResult:
    """Fit strengths; each ranking lists item ids best first (at least two items, no repeats)."""
    rankings = [list(r) for r in rankings]
    if not rankings:
        raise ValueError("no rankings to fit")
    for k, r in enumerate(rankings):
        if len(r) < 2:
            raise ValueError(f"ranking {k} has {len(r)} item(s); a ranking needs at least two")
        if len(set(r)) != len(r):
            raise ValueError(f"ranking {k} lists an item twice: {r}")
    labels = (
        np.unique(np.array([x for r in rankings for x in r], dtype=object).astype(str))
        if any(isinstance(x, str) for r in rankings for x in r)
        else np.unique(np.array([x for r in rankings for x in r]))
    )
    index = {v: i for i, v in enumerate(labels.tolist())}
    width = max(len(r) for r in rankings)
    idx = np.zeros((len(rankings), width), dtype=np.int64)
    mask = np.zeros((len(rankings), width), dtype=bool)
    for k, r in enumerate(rankings):
        idx[k, : len(r)] = [index[x if not isinstance(labels[0], str) else str(x)] for x in r]
        mask[k, : len(r)] = True
    # choice stages: every position except each ranking's last
    lengths = mask.sum(axis=1)
    stage = mask & (np.arange(width)[None, :] < (lengths - 1)[:, None])
    n_items = len(labels)
    chosen = np.bincount(idx[stage], minlength=n_items).astype(float)
    scale = float(stage.sum())

    def fun(s: np.ndarray) -> tuple[float, np.ndarray]:
        sv = np.where(mask, s[idx], -np.inf)
        top = sv.max(axis=1, keepdims=True)
        e = np.exp(sv - top)
        suffix = np.cumsum(e[:, ::-1], axis=1)[:, ::-1]  # sum_{u >= t} e_u
        log_z = np.log(np.where(stage, suffix, 1.0)) + top
        loss = -(np.where(stage, sv, 0.0).sum() - np.where(stage, log_z, 0.0).sum())
        inv = np.where(stage, 1.0 / np.where(stage, suffix, 1.0), 0.0)
        expected = e * np.cumsum(inv, axis=1)  # item at u is in the choice sets t <= u
        grad: np.ndarray = -(
            chosen - np.bincount(idx[mask], weights=expected[mask], minlength=n_items)
        )
        loss += 0.5 * l2 * (s @ s)
        grad += l2 * s
        return loss / scale, grad / scale

    from scipy.optimize import minimize  # imported on use: not by every export

    res = minimize(
        fun,
        np.zeros(n_items),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": gtol, "ftol": 0.0, "maxiter": 5000},
    )
    s = res.x - (res.x.mean() if l2 == 0 else 0.0)
    return BTResult(labels, s, arena_ratings(s), len(rankings), bool(res.success), int(res.nit))
