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
from scipy import sparse

from .base import AggregationResult, argmax_labels, em_e_step, encode

EPS = 1e-10  # floor of probabilities, so no log(0)

# Default Dirichlet pseudo-counts (see ``dawid_skene``): each confusion row starts with 10 pseudo
# labels, 0.9 of them on the diagonal (a diagonal-favouring prior, as in Paun et al. 2018); the
# class prior gets one per class. Chosen by leave-one-rater-out accuracy on PandaLM and Tulu-1
# (docs/aggregation.md): weaker or less diagonal priors fall below majority vote on many-rater,
# few-label crowds, where two raters sharing the same 20 items can "explain" their common ties as
# a shared confusion.
CONFUSION_PRIOR = 10.0
PRIOR_ACCURACY = 0.9
CLASS_PRIOR = 1.0


def confusion_pseudo_counts(k: int, strength: float, accuracy: float) -> np.ndarray:
    """``K x K`` Dirichlet pseudo-counts: ``strength`` per row, ``accuracy`` of it on the diagonal."""
    if strength == 0:
        return np.zeros((k, k))
    if not 0 < accuracy < 1:
        raise ValueError(f"prior_accuracy must be in (0, 1), got {accuracy}")
    off = (1 - accuracy) / (k - 1) if k > 1 else 0.0
    return strength * np.where(np.eye(k, dtype=bool), accuracy, off)


def confusion_m_step(
    design: sparse.csr_matrix,
    post: np.ndarray,
    n_raters: int,
    k: int,
    observed: np.ndarray,
    pseudo: np.ndarray,
) -> np.ndarray:
    """``pi[j, k, l]`` from posteriors plus pseudo-counts ``pseudo[k, l]`` (MAP under a Dirichlet).

    Without pseudo-counts an entry a rater never used stays 0 and a used one is >= EPS.
    """
    mass = (design.T @ post).reshape(n_raters, k, k)  # [j, l, k]
    if pseudo.any():
        mass = mass + pseudo.T[None, :, :]
    else:
        mass = np.where(observed[:, :, None], np.maximum(mass, EPS), 0.0)
    mass = mass / mass.sum(axis=1, keepdims=True)
    return np.transpose(mass, (0, 2, 1))  # [j, k, l]


def log_pi_matrix(pi: np.ndarray) -> np.ndarray:
    """``(rater * K + label) x true_class`` matrix of log-probabilities for the E-step."""
    n_r, k, _ = pi.shape
    with np.errstate(divide="ignore"):
        log = np.log(np.transpose(pi, (0, 2, 1)).reshape(n_r * k, k))
    log[~np.isfinite(log)] = 0.0  # never multiplied by a nonzero design entry
    result: np.ndarray = log
    return result


def class_priors(post: np.ndarray, pseudo: float) -> np.ndarray:
    mass = post.sum(axis=0) + pseudo
    result: np.ndarray = mass / mass.sum()
    return result


def log_prior_density(
    pi: np.ndarray, priors: np.ndarray, pseudo: np.ndarray, class_pseudo: float
) -> float:
    """Log Dirichlet density (up to a constant) of the parameters: EM maximises likelihood plus
    this, so convergence is judged on their sum (the likelihood alone may fall under MAP EM)."""
    with np.errstate(divide="ignore"):
        conf = float((pseudo[None] * np.log(np.maximum(pi, EPS))).sum()) if pseudo.any() else 0.0
    return conf + class_pseudo * float(np.log(np.maximum(priors, EPS)).sum())


def dawid_skene(
    units: Any,
    raters: Any,
    labels: Any,
    n_iter: int = 100,
    tol: float = 1e-7,
    classes: Any = None,
    confusion_prior: float = CONFUSION_PRIOR,
    prior_accuracy: float = PRIOR_ACCURACY,
    class_prior: float = CLASS_PRIOR,
) -> AggregationResult:
    """Fit Dawid-Skene by EM (MAP EM with Dirichlet priors unless the priors are 0).

    Stops after ``n_iter`` iterations or when the objective (log-likelihood plus log prior
    density, per label; ``log_likelihood`` in the result) improves by less than ``tol``
    (``tol=0``: run all iterations unless it decreases).

    ``confusion_prior`` (pseudo labels per confusion row) and ``prior_accuracy`` (their share on
    the diagonal) set
    a Dirichlet prior on every rater's confusion rows; ``class_prior`` a symmetric Dirichlet on the
    class prior. They keep a rater with few labels from getting a degenerate (0/1) confusion
    matrix, which on real crowds makes converged maximum-likelihood Dawid-Skene score *below*
    majority vote (docs/aggregation.md). Bayesian treatments: Raykar et al. (2010), Learning from
    crowds, *JMLR* 11 (MAP EM with priors on rater parameters); Paun et al. (2018), Comparing
    Bayesian models of annotation, *TACL* 6 (Dirichlet priors on Dawid-Skene confusion rows).
    ``confusion_prior=0, class_prior=0`` is the 1979 maximum-likelihood model (as crowd-kit).
    """
    enc = encode(units, raters, labels, classes)
    n_u, n_r, k = enc.shape
    pseudo = confusion_pseudo_counts(k, confusion_prior, prior_accuracy)
    design = enc.rater_label_matrix()
    observed = (np.bincount(enc.r * k + enc.c, minlength=n_r * k) > 0).reshape(n_r, k)
    votes = enc.vote_counts()
    post = votes / votes.sum(axis=1, keepdims=True)
    priors = class_priors(post, class_prior)
    pi = confusion_m_step(design, post, n_r, k, observed, pseudo)
    history: list[float] = []
    it = 0
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        post, unit_ll = em_e_step(design, np.log(np.maximum(priors, EPS)), log_pi_matrix(pi))
        objective = unit_ll.sum() + log_prior_density(pi, priors, pseudo, class_prior)
        priors = class_priors(post, class_prior)
        pi = confusion_m_step(design, post, n_r, k, observed, pseudo)
        history.append(float(objective / len(enc.u)))
        if len(history) > 1 and history[-1] - history[-2] < tol:
            break
    accuracy = np.einsum("k,jkk->j", priors, pi)
    return AggregationResult(
        "dawid_skene",
        enc.units,
        enc.classes,
        post,
        argmax_labels(post, enc.classes),
        enc.raters,
        accuracy,
        confusion=pi,
        priors=priors,
        n_iter=it,
        log_likelihood=history,
    )
