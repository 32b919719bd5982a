"""Shared pieces of the classification aggregators: encoding and the result type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from ..table import as_array, factorize


@dataclass
class Encoded:
    """A long table ``(unit, rater, label)`` as integer codes, NaN labels dropped."""

    u: np.ndarray
    r: np.ndarray
    c: np.ndarray
    units: np.ndarray
    raters: np.ndarray
    classes: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.units), len(self.raters), len(self.classes)

    def rater_label_matrix(self) -> sparse.csr_matrix:
        """``units x (rater * K + label)`` counts: the design matrix of the EM steps."""
        n_u, n_r, k = self.shape
        return sparse.csr_matrix(
            (np.ones(len(self.u)), (self.u, self.r * k + self.c)), shape=(n_u, n_r * k)
        )

    def vote_counts(self) -> np.ndarray:
        n_u, _, k = self.shape
        return np.bincount(self.u * k + self.c, minlength=n_u * k).reshape(n_u, k).astype(float)


def encode(units: Any, raters: Any, labels: Any, classes: Any = None) -> Encoded:
    """Factorize the three columns; ``classes`` fixes the label set (sorted)."""
    vals = as_array(labels, "labels")
    n = len(vals)
    u_raw = as_array(units, "units", n)
    r_raw = as_array(raters, "raters", n)
    if vals.dtype.kind == "f":
        keep = ~np.isnan(vals)
        vals, u_raw, r_raw = vals[keep], u_raw[keep], r_raw[keep]
    if len(vals) == 0:
        raise ValueError("no labels to aggregate")
    u, units_ = factorize(u_raw)
    r, raters_ = factorize(r_raw)
    if classes is None:
        c, classes_ = factorize(vals)
    else:
        classes_ = np.unique(np.asarray(classes))
        c = np.searchsorted(classes_, vals)
        bad = (c >= len(classes_)) | (classes_[np.minimum(c, len(classes_) - 1)] != vals)
        if bad.any():
            raise ValueError(
                f"labels {np.unique(vals[bad])[:5].tolist()} are not among classes {classes_.tolist()}"
            )
    return Encoded(u, r, c.astype(np.int64), units_, raters_, classes_)


@dataclass
class AggregationResult:
    """Item posteriors and per-rater reliability from a classification aggregator.

    ``posteriors[i, k]`` is P(true label of ``units[i]`` is ``classes[k]``); ``labels`` the most
    probable class (NaN-free unless a tie policy left it undecided: then ``None``);
    ``reliability[j]`` a scalar quality of ``raters[j]`` in [0, 1] (its meaning depends on the
    model: accuracy for Dawid-Skene, competence for MACE, agreement with the majority for
    majority vote). ``confusion[j, k, l]`` = P(rater j says l | truth k) when the model has it.
    """

    method: str
    units: np.ndarray
    classes: np.ndarray
    posteriors: np.ndarray
    labels: np.ndarray
    raters: np.ndarray
    reliability: np.ndarray
    confusion: np.ndarray | None = None
    priors: np.ndarray | None = None
    n_iter: int = 0
    log_likelihood: list[float] = field(default_factory=list)

    def label_of(self) -> dict[Any, Any]:
        return dict(zip(self.units.tolist(), self.labels.tolist()))

    def reliability_of(self) -> dict[Any, float]:
        return dict(zip(self.raters.tolist(), self.reliability.tolist()))

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary (posteriors included)."""
        return {
            "method": self.method,
            "classes": self.classes.tolist(),
            "units": self.units.tolist(),
            "labels": self.labels.tolist(),
            "posteriors": self.posteriors.tolist(),
            "raters": self.raters.tolist(),
            "reliability": self.reliability.tolist(),
            "confusion": None if self.confusion is None else self.confusion.tolist(),
            "priors": None if self.priors is None else self.priors.tolist(),
            "n_iter": self.n_iter,
        }


def argmax_labels(posteriors: np.ndarray, classes: np.ndarray) -> np.ndarray:
    result: np.ndarray = classes[np.argmax(posteriors, axis=1)]
    return result


def em_e_step(
    design: sparse.csr_matrix, log_priors: np.ndarray, log_pi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Posteriors and per-unit log-likelihood from ``log_pi[(rater * K + label), true_class]``."""
    logit = design @ log_pi + log_priors
    top = logit.max(axis=1, keepdims=True)
    post = np.exp(logit - top)
    norm = post.sum(axis=1, keepdims=True)
    post /= norm
    return post, (np.log(norm) + top).ravel()
