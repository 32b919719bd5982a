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

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from .base import AggregationResult, argmax_labels, em_e_step, encode

try:  # scipy's kernel of ``csr.T @ dense`` (private): blocks of rows into one output, in its order
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
except ImportError:  # pragma: no cover -- a scipy without it: the whole matrix at once (_mass)
    _csc_matvecs = None

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

#: The least number of labels a rater needs in the fit for a confusion matrix of their own; raters
#: with fewer share one pooled matrix (equal weights among them). See ``dawid_skene`` and
#: docs/aggregation.md ("Evidence per rater") for how the number was chosen.
MIN_LABELS = 20


def mirror_permutation(classes: np.ndarray, mirror: Any) -> np.ndarray | None:
    """``mirror`` (a mapping or ``None``) as a permutation of class indices; every class's image
    must be a class too."""
    if mirror is None:
        return None
    index = {c: i for i, c in enumerate(classes.tolist())}
    try:
        perm = np.array([index[mirror[c]] for c in classes.tolist()], dtype=np.int64)
    except KeyError as exc:
        raise ValueError(
            f"mirror image of a class is not among classes {classes.tolist()}"
        ) from exc
    if sorted(perm.tolist()) != list(range(len(classes))):
        raise ValueError("mirror must be a permutation of the classes")
    return perm


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
    return confusion_from_mass(design.T @ post, n_raters, k, observed, pseudo)


def confusion_from_mass(
    mass_flat: np.ndarray, n_raters: int, k: int, observed: np.ndarray, pseudo: np.ndarray
) -> np.ndarray:
    """:func:`confusion_m_step` from the summed posterior mass ``design.T @ post`` (a sum over
    units, so shards of units can each add theirs: :mod:`preflab.quality.mergeable`)."""
    mass = mass_flat.reshape(n_raters, k, k)  # [j, l, k]
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
    return priors_from_mass(post.sum(axis=0), pseudo)


def priors_from_mass(post_sum: np.ndarray, pseudo: float) -> np.ndarray:
    """:func:`class_priors` from the posteriors summed over units."""
    mass = post_sum + pseudo
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


def pooled_raters(r: np.ndarray, n_raters: int, min_labels: int) -> tuple[np.ndarray, int]:
    """Fit indices: raters with at least ``min_labels`` labels keep their own confusion matrix;
    the others share one (the pooled rater, index 0 when there is any). ``(index per rater, n)``."""
    return pooled_from_counts(np.bincount(r, minlength=n_raters), min_labels)


def pooled_from_counts(counts: np.ndarray, min_labels: int) -> tuple[np.ndarray, int]:
    """:func:`pooled_raters` from the number of labels of each rater."""
    n_raters = len(counts)
    own = counts >= min_labels
    if own.all():
        return np.arange(n_raters), n_raters
    index = np.zeros(n_raters, dtype=np.int64)  # 0: the pooled rater
    index[own] = np.arange(1, 1 + int(own.sum()))
    return index, 1 + int(own.sum())


def mirrored(
    pi: np.ndarray, priors: np.ndarray, mirror: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Parameters averaged with their image under the class permutation ``mirror``."""
    return (
        0.5 * (pi + pi[:, mirror][:, :, mirror]),
        0.5 * (priors + priors[mirror]),
    )


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
    min_labels: int = MIN_LABELS,
    mirror: Any = None,
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

    **Evidence.** A rater with fewer than ``min_labels`` labels gets no confusion matrix of their
    own: all such raters share one, fitted on their labels together, so they weigh the same (a
    rater seen on two or three items cannot be told from any other; Dawid-Skene would otherwise
    read a confident preference into a 2-2 split from the accident of who agreed with whom
    elsewhere). ``min_labels=0`` (or 1) gives every rater their own matrix, as the 1979 model.

    ``mirror``: a permutation of ``classes`` (as labels: ``mirror[c]`` is the image of class
    ``c``) under which the model is invariant; the fitted class prior and confusion matrices are
    symmetrised under it at every M-step (EM on the data plus its mirror image, each counted
    half). For preferences over a pair in arbitrary canonical order, ``{-1: 1, 0: 0, 1: -1}``:
    "first better" is no likelier than "second better" and a rater's errors do not depend on
    which candidate sorts first.
    """
    enc = encode(units, raters, labels, classes)
    n_u, n_r, k = enc.shape
    fit_of, n_fit = pooled_raters(enc.r, n_r, min_labels)
    fit_r = fit_of[enc.r]
    pseudo = confusion_pseudo_counts(k, confusion_prior, prior_accuracy)
    design = sparse.csr_matrix(
        (np.ones(len(enc.u)), (enc.u, fit_r * k + enc.c)), shape=(n_u, n_fit * k)
    )
    observed = (np.bincount(fit_r * k + enc.c, minlength=n_fit * k) > 0).reshape(n_fit, k)
    perm = mirror_permutation(enc.classes, mirror)
    if perm is not None:
        observed = observed | observed[:, perm]
    votes = enc.vote_counts()
    post = votes / votes.sum(axis=1, keepdims=True)
    priors = class_priors(post, class_prior)
    pi = confusion_m_step(design, post, n_fit, k, observed, pseudo)
    if perm is not None:
        pi, priors = mirrored(pi, priors, perm)
    history: list[float] = []
    it = 0
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        post, unit_ll = em_e_step(design, np.log(np.maximum(priors, EPS)), log_pi_matrix(pi))
        objective = unit_ll.sum() + log_prior_density(pi, priors, pseudo, class_prior)
        priors = class_priors(post, class_prior)
        pi = confusion_m_step(design, post, n_fit, k, observed, pseudo)
        if perm is not None:
            pi, priors = mirrored(pi, priors, perm)
        history.append(float(objective / len(enc.u)))
        if len(history) > 1 and history[-1] - history[-2] < tol:
            break
    pi = pi[fit_of]  # per rater: the pooled raters share one matrix
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


# -- the same fit on integer codes, in memory bounded per vote ---------------------------------

#: units per block of the blockwise E-step (its temporaries: a few ``block x K`` arrays)
E_STEP_ROWS = 1 << 18


@dataclass
class Design:
    """A ``units x columns`` count matrix as CSR arrays, compact (see :func:`design_from_keys`):
    scipy's constructor would widen them, so blocks of rows become scipy matrices only as the
    EM steps reach them (:func:`_rows`)."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]


def design_from_keys(key: np.ndarray, n_units: int, n_cols: int) -> Design:
    """The ``units x columns`` count matrix of the votes whose ``unit * n_cols + column`` are
    ``key`` (int64; sorted here, in place, and then overwritten): the arrays :func:`dawid_skene`
    gets from COO (``tocsr``: rows in order, sorted column indices, duplicates summed), built
    without the COO triplets, compact: ``indices`` as ``uint16`` when the columns fit,
    ``data`` the counts as ``uint8`` (1 byte a stored vote;
    floats when a count passes 255): :func:`dawid_skene_design` turns a block at a time into the
    floats the COO matrix holds, the same values."""
    key.sort()
    n = len(key)
    start = np.empty(n, dtype=bool)
    if n:
        start[0] = True
        np.not_equal(key[1:], key[:-1], out=start[1:])
    nnz = int(np.count_nonzero(start))
    index = np.int32 if max(nnz, n_cols, n_units) < np.iinfo(np.int32).max else np.int64
    # the columns a byte pair each while they fit (:func:`_rows` widens a block at a time)
    indices = np.empty(nnz, dtype=np.uint16 if n_cols <= 1 << 16 else index)
    # each distinct key's count is written over keys already read: ``done <= at`` throughout
    data = key.view(np.float64)
    top = 0
    row_nnz = np.zeros(n_units, dtype=np.int64)
    at = done = 0
    block = 1 << 20
    while at < n:
        end = min(at + block, n)
        while end < n and not start[end]:  # a block ends where a run of equal keys ends
            end += 1
        first = np.flatnonzero(start[at:end])
        counts = np.diff(np.append(first, end - at))
        distinct = key[at:end][first]  # a copy, taken before ``data`` overwrites the block
        m = len(first)
        indices[done : done + m] = distinct % n_cols
        rows = distinct // n_cols  # sorted
        low = int(rows[0])
        spread = np.bincount(rows - low)
        row_nnz[low : low + len(spread)] += spread
        data[done : done + m] = counts
        top = max(top, int(counts.max()))
        done += m
        at = end
        del first, counts, distinct, rows, spread
    del start
    data = data[:nnz].astype(np.uint8) if top <= 255 else data[:nnz].copy()
    del key
    indptr = np.zeros(n_units + 1, dtype=index)
    np.cumsum(row_nnz, out=indptr[1:])
    return Design(data, indices, indptr, (n_units, n_cols))


def _rows(design: Design, a: int, b: int) -> sparse.csr_matrix:
    """Rows ``a:b`` of ``design``, their data as floats (what the COO-built matrix holds)."""
    s, e = int(design.indptr[a]), int(design.indptr[b])
    return sparse.csr_matrix(
        (
            design.data[s:e].astype(np.float64),
            design.indices[s:e].astype(design.indptr.dtype),
            design.indptr[a : b + 1] - design.indptr[a],
        ),
        shape=(b - a, design.shape[1]),
        copy=False,
    )


def _mass(design: Design, post: np.ndarray, rows: int) -> np.ndarray:
    """``design.T @ post`` as scipy computes it (``csc_matvecs`` over the transposed arrays:
    for each unit in order, its row's entries added into the output), a block of units at a
    time into the same output, so the same sums in the same order: the same floats."""
    n_u, n_cols = design.shape
    k = post.shape[1]
    if _csc_matvecs is None:  # the public product of the whole matrix: the same floats
        whole: np.ndarray = _rows(design, 0, n_u).T @ post
        return whole
    out = np.zeros((n_cols, k), dtype=np.float64)
    flat = out.reshape(-1)
    for a in range(0, n_u, rows):
        b = min(a + rows, n_u)
        block = _rows(design, a, b)
        x = np.ascontiguousarray(post[a:b], dtype=np.float64).reshape(-1)
        _csc_matvecs(n_cols, b - a, k, block.indptr, block.indices, block.data, x, flat)
    return out


def dawid_skene_design(
    design: Design,
    fit_of: np.ndarray,
    n_fit: int,
    classes: np.ndarray,
    n_votes: int,
    n_iter: int = 100,
    tol: float = 1e-7,
    confusion_prior: float = CONFUSION_PRIOR,
    prior_accuracy: float = PRIOR_ACCURACY,
    class_prior: float = CLASS_PRIOR,
    mirror: Any = None,
    rows: int | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`dawid_skene`'s EM on its design matrix (:func:`design_from_keys`, columns
    ``fit rater * K + class``; ``fit_of``, ``n_fit``: :func:`pooled_raters`), the same
    operations in the same order, so the same numbers to the bit: ``(posteriors, labels,
    iterations)``. The E-step runs ``rows`` units at a time into one posterior array (each
    unit's row is computed alone either way) and the M-step's sums go into one output a block
    at a time in scipy's order (:func:`_mass`), so the fit holds the matrix (its counts a byte
    each), one ``units x K`` array of posteriors and one float per unit, not the several
    ``units x K`` temporaries of a whole-matrix step (``rows``: :data:`E_STEP_ROWS` unless
    given). ``n_votes``: the votes' count (the objective is per vote)."""
    n_u = design.shape[0]
    k = len(classes)
    rows = max(1, E_STEP_ROWS if rows is None else rows)
    pseudo = confusion_pseudo_counts(k, confusion_prior, prior_accuracy)
    observed = (np.bincount(design.indices, minlength=n_fit * k) > 0).reshape(n_fit, k)
    perm = mirror_permutation(classes, mirror)
    if perm is not None:
        observed = observed | observed[:, perm]
    post = np.zeros((n_u, k), dtype=np.float64)
    flat = post.reshape(-1)
    for a in range(0, n_u, rows):  # the vote counts per unit and class (exact as floats)
        b = min(a + rows, n_u)
        s, e = int(design.indptr[a]), int(design.indptr[b])
        at = np.repeat(np.arange(b - a, dtype=np.int64), np.diff(design.indptr[a : b + 1]))
        flat[a * k : b * k] = np.bincount(
            at * k + design.indices[s:e].astype(np.int64) % k,
            weights=design.data[s:e].astype(np.float64),
            minlength=(b - a) * k,
        )
    post /= post.sum(axis=1, keepdims=True)
    priors = class_priors(post, class_prior)
    pi = confusion_from_mass(_mass(design, post, rows), n_fit, k, observed, pseudo)
    if perm is not None:
        pi, priors = mirrored(pi, priors, perm)
    unit_ll = np.empty(n_u, dtype=np.float64)
    history: list[float] = []
    it = 0
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        log_priors, log_pi = np.log(np.maximum(priors, EPS)), log_pi_matrix(pi)
        for a in range(0, n_u, rows):
            b = min(a + rows, n_u)
            post[a:b], unit_ll[a:b] = em_e_step(_rows(design, a, b), log_priors, log_pi)
        objective = unit_ll.sum() + log_prior_density(pi, priors, pseudo, class_prior)
        priors = class_priors(post, class_prior)
        pi = confusion_from_mass(_mass(design, post, rows), n_fit, k, observed, pseudo)
        if perm is not None:
            pi, priors = mirrored(pi, priors, perm)
        history.append(float(objective / n_votes))
        if len(history) > 1 and history[-1] - history[-2] < tol:
            break
    return post, argmax_labels(post, classes), it
