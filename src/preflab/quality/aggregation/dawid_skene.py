"""Dawid-Skene: EM over full per-rater confusion matrices.

Dawid, A. P. and Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates
using the EM algorithm. *Journal of the Royal Statistical Society C* 28(1), 20-28.

Model: each unit has a true class ``k`` with prior ``p_k``; rater ``j`` reports ``l`` with
probability ``pi_j[k, l]``. EM starts from majority-vote posteriors (as crowd-kit does), then
alternates the M-step (``pi_j[k, l]`` proportional to the posterior mass of class ``k`` on units
where ``j`` said ``l``; ``p`` = mean posterior) and the E-step (posterior of each unit).

Both steps are one sparse-dense product with the fixed ``units x (rater, label)`` design matrix,
so an iteration over a million labels is a few milliseconds.

Worked example: two careful raters and one who always says 0::

    >>> units = [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    >>> raters = ["a", "b", "s"] * 4
    >>> labels = [1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0]
    >>> r = dawid_skene(units, raters, labels)
    >>> r.labels.tolist()
    [1, 0, 1, 1]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregationResult, argmax_labels, em_e_step, encode

EPS = 1e-10  # floor of observed confusion entries (as crowd-kit), so no log(0)


def confusion_m_step(design, post: np.ndarray, n_raters: int, k: int, observed: np.ndarray) -> np.ndarray:
    """``pi[j, k, l]`` from posteriors; entries a rater never used stay 0, used ones >= EPS."""
    mass = (design.T @ post).reshape(n_raters, k, k)  # [j, l, k]
    mass = np.where(observed[:, :, None], np.maximum(mass, EPS), 0.0)
    mass = mass / mass.sum(axis=1, keepdims=True)
    return np.transpose(mass, (0, 2, 1))  # [j, k, l]


def log_pi_matrix(pi: np.ndarray) -> np.ndarray:
    """``(rater * K + label) x true_class`` matrix of log-probabilities for the E-step."""
    n_r, k, _ = pi.shape
    with np.errstate(divide="ignore"):
        log = np.log(np.transpose(pi, (0, 2, 1)).reshape(n_r * k, k))
    log[~np.isfinite(log)] = 0.0  # never multiplied by a nonzero design entry
    return log


def dawid_skene(
    units: Any,
    raters: Any,
    labels: Any,
    n_iter: int = 100,
    tol: float = 1e-7,
    classes: Any = None,
) -> AggregationResult:
    """Fit Dawid-Skene; stops after ``n_iter`` iterations or when the mean log-likelihood per
    label improves by less than ``tol`` (``tol=0``: run all iterations unless it decreases)."""
    enc = encode(units, raters, labels, classes)
    n_u, n_r, k = enc.shape
    design = enc.rater_label_matrix()
    observed = (np.bincount(enc.r * k + enc.c, minlength=n_r * k) > 0).reshape(n_r, k)
    votes = enc.vote_counts()
    post = votes / votes.sum(axis=1, keepdims=True)
    priors = post.mean(axis=0)
    pi = confusion_m_step(design, post, n_r, k, observed)
    history: list[float] = []
    it = 0
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        post, unit_ll = em_e_step(design, np.log(np.maximum(priors, EPS)), log_pi_matrix(pi))
        priors = post.mean(axis=0)
        pi = confusion_m_step(design, post, n_r, k, observed)
        history.append(float(unit_ll.sum() / len(enc.u)))
        if len(history) > 1 and history[-1] - history[-2] < tol:
            break
    accuracy = np.einsum("k,jkk->j", priors, pi)
    return AggregationResult(
        "dawid_skene", enc.units, enc.classes, post, argmax_labels(post, enc.classes), enc.raters,
        accuracy, confusion=pi, priors=priors, n_iter=it, log_likelihood=history,
    )
