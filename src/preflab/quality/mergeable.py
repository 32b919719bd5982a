"""Mergeable sufficient statistics: the quality figures from chunks of the label table.

Each statistic is a triple ``from_chunk(table) -> S``, ``merge(S, S) -> S`` and
``finalize(S) -> figures``. ``merge`` is associative and commutative, so a label table cut into
chunks (shards of Parquet on a cluster, batches of a database cursor) gives the same figures
as the whole table, provided **every label of a unit is in one chunk** (alpha's coincidences,
percent agreement and the unary resolution are per unit; :mod:`preflab.scale.shards` shards by
item for that reason).

Exactness. Where the statistic allows, the state is integer counts, so merging in any order
gives the same bits:

* alpha: the coincidence matrix ``o_ck = sum_u (n_uc n_uk - [c=k] n_uc) / (m_u - 1)`` is kept
  as one *integer* matrix per unit size ``m`` (``sum`` over the units of that size of
  ``n_uc n_uk - [c=k] n_uc``), divided by ``m - 1`` only in :func:`alpha_figures`;
* percent agreement: per unit size ``m``, the number of units and ``sum_u sum_c n_uc(n_uc-1)``;
* per-rater label counts and up-rates, thumbs per unit, Bradley-Terry win cells: counts.

Dawid-Skene's M-step tables are float sums of posteriors; :func:`tree_reduce` and
:class:`TreeFold` merge them in one fixed binary tree over the chunk order (the same tree
in-process and on a cluster), so a run does not depend on which worker finished first.

Every ``finalize`` equals the single-process function on the whole table
(``tests/quality/test_mergeable.py``): :func:`~preflab.quality.agreement.krippendorff_alpha`
(to 1e-12), :func:`~preflab.quality.agreement.percent_agreement` (1e-12),
``resolve_unary`` of the exports (exactly), :func:`~preflab.quality.aggregation.bradley_terry`
(exactly: it collapses comparisons into the same cells) and
:func:`~preflab.quality.aggregation.dawid_skene` (1e-12).

>>> t = LabelTable.from_arrays(["u1", "u1", "u2", "u2", "u3", "u3"], list("abcdef"),
...                            [1, 1, 2, 2, 1, 2], dimensions=["x"] * 6)
>>> a, b = t.where(np.arange(6) < 2), t.where(np.arange(6) >= 2)
>>> s = merge_agreement(agreement_from_chunk(a), agreement_from_chunk(b))
>>> round(agreement_figures(s)[0]["alpha"], 6)
0.444444
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from scipy import sparse

from .aggregation.base import AggregationResult, argmax_labels, em_e_step
from .aggregation.bradley_terry import BTResult, bradley_terry
from .aggregation.dawid_skene import (
    CLASS_PRIOR,
    CONFUSION_PRIOR,
    EPS,
    MIN_LABELS,
    PRIOR_ACCURACY,
    confusion_from_mass,
    confusion_pseudo_counts,
    log_pi_matrix,
    log_prior_density,
    mirror_permutation,
    mirrored,
    pooled_from_counts,
    priors_from_mass,
)
from .agreement.krippendorff import Level, alpha_from_coincidence, as_level
from .agreement.preference import DEFAULT_LEVELS
from .table import LabelTable, factorize

S = TypeVar("S")
T = TypeVar("T")
GroupKey = tuple[str, str, str]  # (batch, kind, dimension), as LabelTable.groups()


# -- merging in a fixed order ---------------------------------------------------------------


def _split(n: int) -> int:
    """Where :func:`tree_reduce` cuts ``n`` chunks: a perfect binary tree on the left."""
    p = 1 << (n.bit_length() - 1)
    return p // 2 if p == n else p


def tree_reduce(items: Sequence[S], merge: Callable[[S, S], S]) -> S:
    """``items`` merged pairwise in one fixed tree over their order (what :class:`TreeFold`
    builds incrementally and a cluster builds as a task graph)."""
    if not items:
        raise ValueError("nothing to merge: no chunks")
    if len(items) == 1:
        return items[0]
    cut = _split(len(items))
    return merge(tree_reduce(items[:cut], merge), tree_reduce(items[cut:], merge))


class TreeFold:
    """:func:`tree_reduce` one chunk at a time in ``O(log n)`` memory (a binary counter): the
    same tree, so the same bits, as the cluster's reduction."""

    def __init__(self, merge: Callable[[Any, Any], Any]) -> None:
        self.merge = merge
        self.stack: list[tuple[int, Any]] = []

    def add(self, state: Any) -> None:
        size = 1
        while self.stack and self.stack[-1][0] == size:
            _, left = self.stack.pop()
            state = self.merge(left, state)
            size *= 2
        self.stack.append((size, state))

    def result(self) -> Any:
        if not self.stack:
            raise ValueError("nothing to merge: no chunks")
        acc = self.stack[-1][1]
        for _, left in reversed(self.stack[:-1]):
            acc = self.merge(left, acc)
        return acc


class MapReduce(Protocol):
    """Apply ``fn`` to every chunk and merge the results (in-process or on a cluster)."""

    def __call__(self, fn: Callable[[LabelTable], T], merge: Callable[[T, T], T]) -> T: ...


def chunks_map_reduce(chunks: Sequence[LabelTable]) -> MapReduce:
    """A :class:`MapReduce` over tables in memory (the reference; tests and small data)."""

    def run(fn: Callable[[LabelTable], T], merge: Callable[[T, T], T]) -> T:
        return tree_reduce([fn(c) for c in chunks], merge)

    return run


def _add_counts(a: Mapping[Any, int], b: Mapping[Any, int]) -> dict[Any, int]:
    out = dict(a)
    for key, n in b.items():
        out[key] = out.get(key, 0) + n
    return out


def _sorted_counts(counts: Mapping[Any, int]) -> dict[Any, int]:
    return {k: counts[k] for k in sorted(counts)}


# -- Krippendorff's alpha and percent agreement, per (batch, kind, dimension) ----------------


@dataclass(frozen=True)
class GroupAgreement:
    """Integer sufficient statistics of one ``(batch, kind, dimension)`` group."""

    n_labels: int
    n_units: int
    n_pairable: int
    raters: frozenset[str]
    integral: bool  # every value an integer: ordinal, else interval (``level_for``)
    #: ``{m: {(c, k): sum over units with m values of n_uc n_uk - [c=k] n_uc}}``, nonzero only
    coincidence: Mapping[int, Mapping[tuple[float, float], int]]
    #: ``{m: (units with m values, sum over them of sum_c n_uc (n_uc - 1))}``
    agree: Mapping[int, tuple[int, int]]


AgreementState = Mapping[GroupKey, GroupAgreement]


def _group_agreement(units: np.ndarray, raters: np.ndarray, values: np.ndarray) -> GroupAgreement:
    n_labels = len(values)
    u_all, _ = factorize(units)
    n_units = int(u_all.max()) + 1 if n_labels else 0
    keep = ~np.isnan(values)
    vals = values[keep]
    integral = bool(np.all(vals == np.round(vals)))
    u, _ = factorize(units[keep])
    coincidence: dict[int, dict[tuple[float, float], int]] = {}
    agree: dict[int, tuple[int, int]] = {}
    n_pairable = 0
    if len(vals):
        v, domain = factorize(vals)
        n_u = int(u.max()) + 1
        counts = sparse.csr_matrix(
            (np.ones(len(v), dtype=np.int64), (u, v)), shape=(n_u, len(domain))
        )
        counts.sum_duplicates()
        m = np.asarray(counts.sum(axis=1)).ravel()
        sq = counts.multiply(counts - counts.sign())  # n_uc (n_uc - 1), elementwise
        within = np.asarray(sq.sum(axis=1)).ravel()
        for size in np.unique(m[m >= 2]).tolist():
            rows = np.flatnonzero(m == size)
            n_pairable += len(rows)
            sub = counts[rows]
            o = (sub.T @ sub).toarray()
            o[np.diag_indices_from(o)] -= np.asarray(sub.sum(axis=0)).ravel()
            c, k = np.nonzero(o)
            coincidence[int(size)] = {
                (float(domain[i]), float(domain[j])): int(o[i, j])
                for i, j in zip(c.tolist(), k.tolist())
            }
            agree[int(size)] = (len(rows), int(within[rows].sum()))
    return GroupAgreement(
        n_labels,
        n_units,
        n_pairable,
        frozenset(str(r) for r in raters.tolist()),
        integral,
        coincidence,
        agree,
    )


def agreement_from_chunk(table: LabelTable) -> AgreementState:
    """Per ``(batch, kind, dimension)`` group of ``table``: its integer statistics."""
    out: dict[GroupKey, GroupAgreement] = {}
    if not len(table):
        return out
    keys = np.array(
        [
            f"{b}\x00{k}\x00{d}"
            for b, k, d in zip(
                table.batches.tolist(), table.kinds.tolist(), table.dimensions.tolist()
            )
        ],
        dtype=object,
    )
    codes, names = factorize(keys)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for g, name in enumerate(names.tolist()):
        rows = order[bounds[g] : bounds[g + 1]]
        b, k, d = str(name).split("\x00")
        out[(b, k, d)] = _group_agreement(table.units[rows], table.raters[rows], table.values[rows])
    return out


def _merge_group(a: GroupAgreement, b: GroupAgreement) -> GroupAgreement:
    coincidence = {
        m: _add_counts(a.coincidence.get(m, {}), b.coincidence.get(m, {}))
        for m in sorted(set(a.coincidence) | set(b.coincidence))
    }
    agree = {
        m: (
            a.agree.get(m, (0, 0))[0] + b.agree.get(m, (0, 0))[0],
            a.agree.get(m, (0, 0))[1] + b.agree.get(m, (0, 0))[1],
        )
        for m in sorted(set(a.agree) | set(b.agree))
    }
    return GroupAgreement(
        a.n_labels + b.n_labels,
        a.n_units + b.n_units,
        a.n_pairable + b.n_pairable,
        a.raters | b.raters,
        a.integral and b.integral,
        coincidence,
        agree,
    )


def merge_agreement(a: AgreementState, b: AgreementState) -> AgreementState:
    """Groups of both; a group in both adds up (its units are disjoint: one chunk per unit)."""
    out = dict(a)
    for key, group in b.items():
        out[key] = _merge_group(out[key], group) if key in out else group
    return out


def coincidence_matrix(group: GroupAgreement) -> tuple[np.ndarray, np.ndarray]:
    """``(o, domain)``: the coincidence matrix over the sorted values, summed by unit size."""
    domain = np.array(sorted({c for table in group.coincidence.values() for c, _ in table}))
    index = {v: i for i, v in enumerate(domain.tolist())}
    o = np.zeros((len(domain), len(domain)))
    for m in sorted(group.coincidence):
        part = np.zeros_like(o)
        for (c, k), n in group.coincidence[m].items():
            part[index[c], index[k]] = n
        o += part / (m - 1.0)
    return o, domain


def group_level(dimension: str, integral: bool, metrics: Mapping[str, str] | None) -> Level:
    """The measurement level ``agreement_summary`` would pick (``level_for``)."""
    if metrics and dimension in metrics:
        return as_level(metrics[dimension])
    if dimension in DEFAULT_LEVELS:
        return as_level(DEFAULT_LEVELS[dimension])
    return "ordinal" if integral else "interval"


def alpha_figures(group: GroupAgreement, level: Level) -> dict[str, float]:
    """Alpha (NaN when undefined) and percent agreement (NaN without a pairable unit)."""
    if group.n_pairable == 0:
        alpha = float("nan")
    else:
        o, domain = coincidence_matrix(group)
        alpha = alpha_from_coincidence(o, domain, level)
    units = sum(n for n, _ in group.agree.values())
    share = sum(s / (m * (m - 1.0)) for m, (_, s) in sorted(group.agree.items()))
    return {"alpha": alpha, "percent_agreement": share / units if units else float("nan")}


def agreement_figures(
    state: AgreementState, metrics: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """One row per group, sorted, with the keys of ``agreement_summary`` it can give exactly
    (the bootstrap interval and Gwet's AC need every unit and are left out)."""
    rows = []
    for (batch, kind, dim), group in sorted(state.items()):
        level = group_level(dim, group.integral, metrics)
        rows.append(
            {
                "batch": batch,
                "kind": kind,
                "dimension": dim,
                "level": level,
                "n_labels": group.n_labels,
                "n_units": group.n_units,
                "n_pairable_units": group.n_pairable,
                "n_raters": len(group.raters),
                **alpha_figures(group, level),
            }
        )
    return rows


# -- per-rater label counts and up-rates ----------------------------------------------------

#: ``{(rater, kind, dimension): (labels, labels with a value > 0)}``
RaterState = Mapping[tuple[str, str, str], tuple[int, int]]


def raters_from_chunk(table: LabelTable) -> RaterState:
    keep = ~np.isnan(table.values)
    keys = np.array(
        [
            f"{r}\x00{k}\x00{d}"
            for r, k, d in zip(
                table.raters[keep].tolist(),
                table.kinds[keep].tolist(),
                table.dimensions[keep].tolist(),
            )
        ],
        dtype=object,
    )
    if not len(keys):
        return {}
    codes, names = factorize(keys)
    n = np.bincount(codes, minlength=len(names))
    up = np.bincount(codes, weights=(table.values[keep] > 0).astype(np.int64), minlength=len(names))
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for name, a, b in zip(names.tolist(), n.tolist(), up.tolist()):
        r, k, d = str(name).split("\x00")
        out[(r, k, d)] = (int(a), int(b))
    return out


def merge_raters(a: RaterState, b: RaterState) -> RaterState:
    out = dict(a)
    for key, (n, up) in b.items():
        n0, up0 = out.get(key, (0, 0))
        out[key] = (n0 + n, up0 + up)
    return out


def rater_figures(state: RaterState) -> list[dict[str, Any]]:
    """Per rater and dimension: labels, positive labels (thumbs up, ``winner`` = second
    candidate) and their share."""
    return [
        {"rater": r, "kind": k, "dimension": d, "n_labels": n, "n_up": up, "up_rate": up / n}
        for (r, k, d), (n, up) in sorted(state.items())
    ]


# -- thumbs: per-unit up/down counts and the KTO resolution ---------------------------------


@dataclass(frozen=True)
class UnitThumbs:
    up: int
    down: int
    raters: frozenset[str]


#: ``{(item_id, candidate_id): thumbs}`` of the ``unary`` rows (unit ``item::candidate``)
ThumbState = Mapping[tuple[str, str], UnitThumbs]


def thumbs_from_chunk(table: LabelTable) -> ThumbState:
    sub = table.where((table.kinds == "unary") & ~np.isnan(table.values))
    if not len(sub):
        return {}
    u, names = factorize(sub.units)
    up = np.bincount(u, weights=(sub.values > 0).astype(np.int64), minlength=len(names))
    n = np.bincount(u, minlength=len(names))
    order = np.argsort(u, kind="stable")
    bounds = np.searchsorted(u[order], np.arange(len(names) + 1))
    raters = sub.raters[order].tolist()
    first_item = sub.items[order[bounds[:-1]]].tolist()
    out: dict[tuple[str, str], UnitThumbs] = {}
    for g, unit in enumerate(names.tolist()):
        item = str(first_item[g])
        cand = str(unit)[len(item) + 2 :]
        out[(item, cand)] = UnitThumbs(
            int(up[g]),
            int(n[g] - up[g]),
            frozenset(str(r) for r in raters[bounds[g] : bounds[g + 1]]),
        )
    return out


def merge_thumbs(a: ThumbState, b: ThumbState) -> ThumbState:
    out = dict(a)
    for key, t in b.items():
        if key in out:
            o = out[key]
            t = UnitThumbs(o.up + t.up, o.down + t.down, o.raters | t.raters)
        out[key] = t
    return out


@dataclass(frozen=True)
class ResolvedThumb:
    """One resolved KTO row, the fields of the exports' ``ResolvedUnary``."""

    item_id: str
    candidate_id: str
    label: bool
    n_raters: int
    agreement: float
    rater_hashes: tuple[str, ...]


def resolve_thumbs(state: ThumbState) -> tuple[list[ResolvedThumb], dict[str, int]]:
    """Per candidate the plurality thumb, in ``(item, candidate)`` order; an even split is
    dropped (``resolve_unary``'s rule). Returns the rows and ``{"no-majority": dropped}``."""
    rows = []
    dropped = 0
    for (item, cand), t in sorted(state.items()):
        n = t.up + t.down
        if t.up == t.down:
            dropped += 1
            continue
        rows.append(
            ResolvedThumb(
                item, cand, t.up > t.down, n, max(t.up, t.down) / n, tuple(sorted(t.raters))
            )
        )
    return rows, {"no-majority": dropped}


#: ``{"units", "labels", "up_labels", "resolved_up", "resolved_down", "no_majority"}``
ThumbSummary = Mapping[str, int]


def thumb_summary_from_chunk(table: LabelTable) -> ThumbSummary:
    """The resolution's counts only: small enough to merge across any number of shards."""
    state = thumbs_from_chunk(table)
    rows, drops = resolve_thumbs(state)
    up = sum(r.label for r in rows)
    return {
        "units": len(state),
        "labels": sum(t.up + t.down for t in state.values()),
        "up_labels": sum(t.up for t in state.values()),
        "resolved_up": up,
        "resolved_down": len(rows) - up,
        "no_majority": drops["no-majority"],
    }


def merge_thumb_summary(a: ThumbSummary, b: ThumbSummary) -> ThumbSummary:
    return _sorted_counts(_add_counts(a, b))


# -- Bradley-Terry win counts ---------------------------------------------------------------

#: ``{(lo, hi, value): comparisons}`` from ``winner`` rows (value -1 lo better, 0 tie, 1 hi)
WinState = Mapping[tuple[str, str, float], int]


def wins_from_chunk(table: LabelTable) -> WinState:
    keep = (table.dimensions == "winner") & ~np.isnan(table.values)
    out: dict[tuple[str, str, float], int] = {}
    for unit, value in zip(table.units[keep].tolist(), table.values[keep].tolist()):
        lo, _, hi = str(unit).rpartition("::")[2].partition("|")
        key = (lo, hi, float(value))
        out[key] = out.get(key, 0) + 1
    return out


def merge_wins(a: WinState, b: WinState) -> WinState:
    return _add_counts(a, b)


def bradley_terry_from_wins(state: WinState, **kwargs: Any) -> BTResult:
    """The existing fit on the merged cells (it collapses comparisons to the same cells, so the
    result is the one of :func:`bradley_terry` on every comparison)."""
    if not state:
        raise ValueError("no winner labels: nothing to fit")
    keys = sorted(state)
    counts = np.array([state[k] for k in keys], dtype=np.int64)
    lo = np.repeat(np.array([k[0] for k in keys], dtype=object), counts)
    hi = np.repeat(np.array([k[1] for k in keys], dtype=object), counts)
    value = np.repeat(np.array([k[2] for k in keys], dtype=float), counts)
    return bradley_terry(lo, hi, (1.0 - value) / 2.0, **kwargs)


# -- Dawid-Skene: per-chunk E-step, merged M-step tables ------------------------------------

#: ``{(rater, class): labels}`` over the table: the encoding and the pooling of the fit
DSCountState = Mapping[tuple[str, float], int]


def ds_counts_from_chunk(table: LabelTable) -> DSCountState:
    keep = ~np.isnan(table.values)
    out: dict[tuple[str, float], int] = {}
    for r, v in zip(table.raters[keep].tolist(), table.values[keep].tolist()):
        key = (str(r), float(v))
        out[key] = out.get(key, 0) + 1
    return out


def merge_ds_counts(a: DSCountState, b: DSCountState) -> DSCountState:
    return _add_counts(a, b)


@dataclass(frozen=True)
class DSParams:
    """What every chunk needs for one E-step: the global encoding and the current parameters."""

    raters: np.ndarray  # sorted rater names
    classes: np.ndarray  # sorted classes
    fit_of: np.ndarray  # fit index per rater (pooled raters share one)
    n_fit: int
    log_priors: np.ndarray | None  # None: the majority-vote start
    log_pi: np.ndarray | None


@dataclass(frozen=True)
class DSSums:
    """Sums over units: posteriors, the M-step mass ``design.T @ post`` and the log-likelihood."""

    post_sum: np.ndarray
    mass: np.ndarray
    loglik: float


def _ds_design(table: LabelTable, params: DSParams) -> tuple[sparse.csr_matrix, np.ndarray]:
    keep = ~np.isnan(table.values)
    u, units = factorize(table.units[keep])
    r = np.searchsorted(params.raters, table.raters[keep])
    c = np.searchsorted(params.classes, table.values[keep])
    k = len(params.classes)
    design = sparse.csr_matrix(
        (np.ones(len(u)), (u, params.fit_of[r] * k + c)), shape=(len(units), params.n_fit * k)
    )
    votes = np.bincount(u * k + c, minlength=len(units) * k).reshape(len(units), k).astype(float)
    return design, votes


def ds_posteriors(table: LabelTable, params: DSParams) -> tuple[np.ndarray, np.ndarray]:
    """``(units, posteriors)`` of a chunk's units (sorted) under ``params``."""
    design, votes = _ds_design(table, params)
    _, units = factorize(table.units[~np.isnan(table.values)])
    if params.log_priors is None or params.log_pi is None:
        return units, votes / votes.sum(axis=1, keepdims=True)
    post, _ = em_e_step(design, params.log_priors, params.log_pi)
    return units, post


def ds_sums_from_chunk(table: LabelTable, params: DSParams) -> DSSums:
    design, votes = _ds_design(table, params)
    if params.log_priors is None or params.log_pi is None:
        post = votes / votes.sum(axis=1, keepdims=True)
        loglik = 0.0
    else:
        post, unit_ll = em_e_step(design, params.log_priors, params.log_pi)
        loglik = float(unit_ll.sum())
    return DSSums(post.sum(axis=0), np.asarray(design.T @ post), loglik)


def merge_ds_sums(a: DSSums, b: DSSums) -> DSSums:
    return DSSums(a.post_sum + b.post_sum, a.mass + b.mass, a.loglik + b.loglik)


@dataclass(frozen=True)
class DSFit:
    """A Dawid-Skene fit from merged tables; per-unit posteriors come from
    :func:`ds_posteriors` with ``final`` (the parameters of the last E-step)."""

    result: AggregationResult  # units, posteriors and labels empty: they live in the chunks
    final: DSParams


def dawid_skene_merged(
    map_reduce: MapReduce,
    n_iter: int = 100,
    tol: float = 1e-7,
    classes: Iterable[Any] | None = None,
    confusion_prior: float = CONFUSION_PRIOR,
    prior_accuracy: float = PRIOR_ACCURACY,
    class_prior: float = CLASS_PRIOR,
    min_labels: int = MIN_LABELS,
    mirror: Any = None,
) -> DSFit:
    """:func:`~preflab.quality.aggregation.dawid_skene` with each E-step run per chunk and the
    M-step's tables merged: the same start, iterations and stopping rule."""
    counts = map_reduce(ds_counts_from_chunk, merge_ds_counts)
    if not counts:
        raise ValueError("no labels to aggregate")
    raters = np.array(sorted({r for r, _ in counts}), dtype=object)
    seen = np.array(sorted({c for _, c in counts}))
    if classes is None:
        classes_ = seen
    else:
        classes_ = np.unique(np.asarray(list(classes)))
        bad = np.setdiff1d(seen, classes_)
        if len(bad):
            raise ValueError(f"labels {bad[:5].tolist()} are not among classes {classes_.tolist()}")
    k = len(classes_)
    r_index = {r: i for i, r in enumerate(raters.tolist())}
    c_index = {c: i for i, c in enumerate(classes_.tolist())}
    per_rater_class = np.zeros((len(raters), k), dtype=np.int64)
    for (r, c), n in counts.items():
        per_rater_class[r_index[r], c_index[c]] = n
    n_labels = int(per_rater_class.sum())
    fit_of, n_fit = pooled_from_counts(per_rater_class.sum(axis=1), min_labels)
    observed = np.zeros((n_fit, k), dtype=bool)
    np.logical_or.at(observed, fit_of, per_rater_class > 0)
    perm = mirror_permutation(classes_, mirror)
    if perm is not None:
        observed = observed | observed[:, perm]
    pseudo = confusion_pseudo_counts(k, confusion_prior, prior_accuracy)

    def step(params: DSParams) -> DSSums:
        return map_reduce(lambda t: ds_sums_from_chunk(t, params), merge_ds_sums)

    params = DSParams(raters, classes_, fit_of, n_fit, None, None)
    sums = step(params)
    priors = priors_from_mass(sums.post_sum, class_prior)
    pi = confusion_from_mass(sums.mass, n_fit, k, observed, pseudo)
    if perm is not None:
        pi, priors = mirrored(pi, priors, perm)
    history: list[float] = []
    it = 0
    for it in range(1, n_iter + 1):  # noqa: B007 -- the count is reported after the loop
        params = DSParams(
            raters, classes_, fit_of, n_fit, np.log(np.maximum(priors, EPS)), log_pi_matrix(pi)
        )
        sums = step(params)
        objective = sums.loglik + log_prior_density(pi, priors, pseudo, class_prior)
        priors = priors_from_mass(sums.post_sum, class_prior)
        pi = confusion_from_mass(sums.mass, n_fit, k, observed, pseudo)
        if perm is not None:
            pi, priors = mirrored(pi, priors, perm)
        history.append(float(objective / n_labels))
        if len(history) > 1 and history[-1] - history[-2] < tol:
            break
    pi = pi[fit_of]
    accuracy = np.einsum("k,jkk->j", priors, pi)
    empty = np.zeros((0, k))
    result = AggregationResult(
        "dawid_skene",
        np.zeros(0, dtype=object),
        classes_,
        empty,
        argmax_labels(empty, classes_),
        raters,
        accuracy,
        confusion=pi,
        priors=priors,
        n_iter=it,
        log_likelihood=history,
    )
    return DSFit(result, params)
