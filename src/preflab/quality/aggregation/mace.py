"""MACE: Multi-Annotator Competence Estimation (EM version).

Hovy, D., Berg-Kirkpatrick, T., Vaswani, A. and Hovy, E. (2013). Learning whom to trust with
MACE. *NAACL-HLT*, 1120-1130.

Each rater ``j`` either knows the answer (probability ``theta_j``, the *competence*) and gives the
true label, or spams, drawing a label from their own distribution ``xi_j``. So
``P(label l | truth k) = theta_j [l = k] + (1 - theta_j) xi_j[l]``. True labels have a uniform
prior, as in the paper. EM: the E-step is the Dawid-Skene one with that confusion matrix; the
M-step re-estimates ``theta_j`` from the expected number of "knowing" labels and ``xi_j`` from
the expected spam labels, with additive ``smoothing`` (the paper's EM uses 0.01).

>>> units = [1, 1, 1, 2, 2, 2, 3, 3, 3]
>>> r = mace(units, ["a", "b", "spam"] * 3, [1, 1, 0, 0, 0, 0, 1, 1, 0])
>>> r.labels.tolist(), bool(r.reliability[2] < r.reliability[0])
([1, 0, 1], True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregationResult, argmax_labels, em_e_step, encode
from .dawid_skene import log_pi_matrix


def mace_confusion(theta: np.ndarray, xi: np.ndarray) -> np.ndarray:
    k = xi.shape[1]
    result: np.ndarray = (
        theta[:, None, None] * np.eye(k)[None] + (1 - theta)[:, None, None] * xi[:, None, :]
    )
    return result


def mace(
    units: Any,
    raters: Any,
    labels: Any,
    n_iter: int = 100,
    tol: float = 1e-7,
    smoothing: float = 0.01,
    initial_competence: float = 0.5,
    classes: Any = None,
) -> AggregationResult:
    enc = encode(units, raters, labels, classes)
    n_u, n_r, k = enc.shape
    design = enc.rater_label_matrix()
    theta = np.full(n_r, initial_competence)
    xi = np.full((n_r, k), 1.0 / k)
    log_prior = np.full(k, -np.log(k))
    n_per_rater = np.bincount(enc.r, minlength=n_r)
    history: list[float] = []
    it = 0
    post = np.full((n_u, k), 1.0 / k)
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        post, unit_ll = em_e_step(design, log_prior, log_pi_matrix(mace_confusion(theta, xi)))
        # P(knows | truth = given label) for each label row, weighted by P(truth = given label)
        th, x = theta[enc.r], xi[enc.r, enc.c]
        knows = post[enc.u, enc.c] * th / (th + (1 - th) * x)
        spam = 1.0 - knows
        theta = (np.bincount(enc.r, weights=knows, minlength=n_r) + smoothing) / (
            n_per_rater + 2 * smoothing
        )
        xi = (
            np.bincount(enc.r * k + enc.c, weights=spam, minlength=n_r * k).reshape(n_r, k)
            + smoothing
        )
        xi /= xi.sum(axis=1, keepdims=True)
        history.append(float(unit_ll.sum() / len(enc.u)))
        if len(history) > 1 and abs(history[-1] - history[-2]) < tol:
            break
    return AggregationResult(
        "mace",
        enc.units,
        enc.classes,
        post,
        argmax_labels(post, enc.classes),
        enc.raters,
        theta,
        confusion=mace_confusion(theta, xi),
        priors=np.full(k, 1.0 / k),
        n_iter=it,
        log_likelihood=history,
    )
