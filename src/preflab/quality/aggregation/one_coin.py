"""One-coin Dawid-Skene: each rater has a single accuracy, errors spread evenly.

Dawid and Skene (1979) restricted to ``pi_j[k, k] = a_j`` and ``pi_j[k, l] = (1 - a_j)/(K - 1)``
(the "one-coin" model, e.g. Zhang et al. 2014, *Spectral Methods meet EM*, NeurIPS). The M-step
is ``a_j`` = mean posterior of the label ``j`` gave; the E-step is that of Dawid-Skene.

>>> r = one_coin_dawid_skene([1, 1, 1, 2, 2, 2], ["a", "b", "c"] * 2, [1, 1, 0, 0, 0, 1])
>>> r.labels.tolist()
[1, 0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregationResult, argmax_labels, em_e_step, encode
from .dawid_skene import EPS, log_pi_matrix


def one_coin_confusion(accuracy: np.ndarray, k: int) -> np.ndarray:
    acc = np.clip(accuracy, EPS, 1 - EPS)
    off = (1 - acc) / (k - 1)
    pi = np.broadcast_to(off[:, None, None], (len(acc), k, k)).copy()
    idx = np.arange(k)
    pi[:, idx, idx] = acc[:, None]
    return pi


def one_coin_dawid_skene(
    units: Any, raters: Any, labels: Any, n_iter: int = 100, tol: float = 1e-7, classes: Any = None
) -> AggregationResult:
    enc = encode(units, raters, labels, classes)
    n_u, n_r, k = enc.shape
    if k < 2:
        raise ValueError("one-coin Dawid-Skene needs at least two classes")
    design = enc.rater_label_matrix()
    votes = enc.vote_counts()
    post = votes / votes.sum(axis=1, keepdims=True)
    n_per_rater = np.bincount(enc.r, minlength=n_r)

    def m_step(p: np.ndarray) -> np.ndarray:
        return np.bincount(enc.r, weights=p[enc.u, enc.c], minlength=n_r) / n_per_rater

    accuracy = m_step(post)
    priors = post.mean(axis=0)
    history: list[float] = []
    it = 0
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        pi = one_coin_confusion(accuracy, k)
        post, unit_ll = em_e_step(design, np.log(np.maximum(priors, EPS)), log_pi_matrix(pi))
        priors = post.mean(axis=0)
        accuracy = m_step(post)
        history.append(float(unit_ll.sum() / len(enc.u)))
        if len(history) > 1 and history[-1] - history[-2] < tol:
            break
    return AggregationResult(
        "one_coin_dawid_skene",
        enc.units,
        enc.classes,
        post,
        argmax_labels(post, enc.classes),
        enc.raters,
        accuracy,
        confusion=one_coin_confusion(accuracy, k),
        priors=priors,
        n_iter=it,
        log_likelihood=history,
    )
