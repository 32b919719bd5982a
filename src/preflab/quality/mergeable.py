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
>>> a, b = (Chunk.from_table(t.where(np.arange(6) < 2)),
...         Chunk.from_table(t.where(np.arange(6) >= 2)))
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


def tree_split(n: int) -> int:
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
    cut = tree_split(len(items))
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

    def __call__(self, fn: Callable[[Chunk], T], merge: Callable[[T, T], T]) -> T: ...


def chunks_map_reduce(tables: Sequence[LabelTable]) -> MapReduce:
    """A :class:`MapReduce` over tables in memory (the reference; tests and small data)."""
    chunks = [Chunk.from_table(t) for t in tables]

    def run(fn: Callable[[Chunk], T], merge: Callable[[T, T], T]) -> T:
        return tree_reduce([fn(c) for c in chunks], merge)

    return run


def _add_counts(a: Mapping[Any, int], b: Mapping[Any, int]) -> dict[Any, int]:
    out = dict(a)
    for key, n in b.items():
        out[key] = out.get(key, 0) + n
    return out


def _sorted_counts(counts: Mapping[Any, int]) -> dict[Any, int]:
    return {k: counts[k] for k in sorted(counts)}


# -- the chunk: dictionary-encoded columns -------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A dictionary-encoded column: ``labels[codes]`` are its values (``labels`` distinct, in
    any order). Statistics work on the integer codes and turn only distinct labels into keys."""

    codes: np.ndarray  # int64, one per row
    labels: np.ndarray  # object

    @classmethod
    def of(cls, values: Any) -> Column:
        codes, labels = factorize(np.asarray(values, dtype=object))
        return cls(codes, labels.astype(object))

    def values(self) -> np.ndarray:
        result: np.ndarray = self.labels[self.codes]
        return result

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """Codes ``0..k-1`` over the labels present, and those labels."""
        codes, used = factorize(self.codes)
        labels: np.ndarray = self.labels[used]
        return codes, labels


@dataclass(frozen=True)
class Chunk:
    """The columns of the long label table a statistic reads, dictionary-encoded (a Parquet
    shard is read that way without turning every cell into a Python string)."""

    item: Column
    unit: Column
    rater: Column
    kind: Column
    dimension: Column
    batch: Column
    value: np.ndarray  # float, NaN = missing

    @classmethod
    def from_table(cls, table: LabelTable) -> Chunk:
        return cls(
            Column.of(table.items),
            Column.of(table.units),
            Column.of(table.raters),
            Column.of(table.kinds),
            Column.of(table.dimensions),
            Column.of(table.batches),
            np.asarray(table.values, dtype=float),
        )

    def __len__(self) -> int:
        return len(self.value)

    def take(self, rows: np.ndarray) -> Chunk:
        def col(c: Column) -> Column:
            return Column(c.codes[rows], c.labels)

        return Chunk(
            col(self.item),
            col(self.unit),
            col(self.rater),
            col(self.kind),
            col(self.dimension),
            col(self.batch),
            self.value[rows],
        )

    def select(self, kind: str, dimension: str) -> Chunk:
        """The rows of one ``(kind, dimension)``."""
        mask = np.isin(self.kind.codes, np.flatnonzero(self.kind.labels == kind)) & np.isin(
            self.dimension.codes, np.flatnonzero(self.dimension.labels == dimension)
        )
        return self.take(np.flatnonzero(mask))


def _group_rows(keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Distinct integer ``keys`` (sorted) and the rows of each."""
    codes, distinct = factorize(keys)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(distinct) + 1))
    return distinct, [order[bounds[g] : bounds[g + 1]] for g in range(len(distinct))]


def _combined(*cols: Column) -> np.ndarray:
    """One int64 key per row from several columns' codes."""
    key = np.zeros(len(cols[0].codes), dtype=np.int64)
    for c in cols:
        key = key * max(len(c.labels), 1) + c.codes
    return key


# -- Krippendorff's alpha and percent agreement, per (batch, kind, dimension) ----------------


@dataclass(frozen=True)
class GroupAgreement:
    """Integer sufficient statistics of one ``(batch, kind, dimension)`` group."""

    n_labels: int
    n_units: int
    n_pairable: int  # units with two or more non-missing values (alpha's)
    n_two_rows: int  # units with two or more rows, missing or not (agreement_summary's count)
    raters: frozenset[str]
    integral: bool  # every value an integer: ordinal, else interval (``level_for``)
    #: ``{m: {(c, k): sum over units with m values of n_uc n_uk - [c=k] n_uc}}``, nonzero only
    coincidence: Mapping[int, Mapping[tuple[float, float], int]]
    #: ``{m: (units with m values, sum over them of sum_c n_uc (n_uc - 1))}``
    agree: Mapping[int, tuple[int, int]]


AgreementState = Mapping[GroupKey, GroupAgreement]


def _group_agreement(chunk: Chunk) -> GroupAgreement:
    n_labels = len(chunk)
    rows_per_unit = np.bincount(factorize(chunk.unit.codes)[0])
    n_units = len(rows_per_unit)
    n_two_rows = int((rows_per_unit >= 2).sum())
    raters = frozenset(chunk.rater.labels[np.unique(chunk.rater.codes)].tolist())
    keep = ~np.isnan(chunk.value)
    vals = chunk.value[keep]
    integral = bool(np.all(vals == np.round(vals)))
    coincidence: dict[int, dict[tuple[float, float], int]] = {}
    agree: dict[int, tuple[int, int]] = {}
    n_pairable = 0
    if len(vals):
        u, _ = factorize(chunk.unit.codes[keep])
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
        n_labels, n_units, n_pairable, n_two_rows, raters, integral, coincidence, agree
    )


def fold_unit_values(
    coincidence: dict[int, dict[tuple[float, float], int]],
    agree: dict[int, tuple[int, int]],
    counts: Mapping[float, int],
    times: int = 1,
) -> None:
    """Add ``times`` units whose non-missing values have the ``counts`` (value: how many; two or
    more values in all) to the integer sums of :class:`GroupAgreement` (``coincidence`` and
    ``agree``, in place): what :func:`_group_agreement` sums over a chunk's units, one unit
    pattern at a time (the streaming report's :class:`~.accumulate.AgreementGroup` folds its
    units' patterns here and finishes with :func:`alpha_figures`)."""
    m = sum(counts.values())
    table = coincidence.setdefault(m, {})
    for c, n_c in counts.items():
        for k, n_k in counts.items():
            pair = n_c * n_k - (n_c if c == k else 0)
            if pair:
                table[(c, k)] = table.get((c, k), 0) + times * pair
    units, within = agree.get(m, (0, 0))
    agree[m] = (units + times, within + times * sum(n * (n - 1) for n in counts.values()))


def agreement_from_chunk(chunk: Chunk) -> AgreementState:
    """Per ``(batch, kind, dimension)`` group of the chunk: its integer statistics."""
    out: dict[GroupKey, GroupAgreement] = {}
    if not len(chunk):
        return out
    _, groups = _group_rows(_combined(chunk.batch, chunk.kind, chunk.dimension))
    for rows in groups:
        r = int(rows[0])
        key = (
            str(chunk.batch.labels[chunk.batch.codes[r]]),
            str(chunk.kind.labels[chunk.kind.codes[r]]),
            str(chunk.dimension.labels[chunk.dimension.codes[r]]),
        )
        out[key] = _group_agreement(chunk.take(rows))
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
        a.n_two_rows + b.n_two_rows,
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
    return {k: out[k] for k in sorted(out)}


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
                "n_pairable_units": group.n_two_rows,
                "n_raters": len(group.raters),
                **alpha_figures(group, level),
            }
        )
    return rows


# -- per-rater label counts and up-rates ----------------------------------------------------


@dataclass(frozen=True, eq=False)
class RaterState:
    """Per ``(rater, kind, dimension)``, sorted: labels and labels with a value > 0. Columns,
    not a dict: a crowd of production raters is hundreds of thousands of keys per shard."""

    raters: np.ndarray  # object
    kinds: np.ndarray  # object
    dimensions: np.ndarray  # object
    n: np.ndarray  # int64
    up: np.ndarray  # int64

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaterState):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("raters", "kinds", "dimensions", "n", "up")
        )

    __hash__ = None  # type: ignore[assignment]


def _rater_state(
    raters: np.ndarray, kinds: np.ndarray, dims: np.ndarray, n: np.ndarray, up: np.ndarray
) -> RaterState:
    """Rows summed per distinct key, sorted by ``(rater, kind, dimension)``."""
    key = np.array(
        [f"{r}\x00{k}\x00{d}" for r, k, d in zip(raters.tolist(), kinds.tolist(), dims.tolist())],
        dtype=object,
    )
    if not len(key):
        e = np.zeros(0, dtype=object)
        z = np.zeros(0, dtype=np.int64)
        return RaterState(e, e, e, z, z)
    distinct, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    total = np.zeros(len(distinct), dtype=np.int64)
    positive = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(total, inverse, n)
    np.add.at(positive, inverse, up)
    return RaterState(raters[first], kinds[first], dims[first], total, positive)


def raters_from_chunk(chunk: Chunk) -> RaterState:
    keep = np.flatnonzero(~np.isnan(chunk.value))
    sub = chunk.take(keep)
    codes, distinct = factorize(_combined(sub.rater, sub.kind, sub.dimension))
    n = np.bincount(codes, minlength=len(distinct)).astype(np.int64)
    up = np.bincount(codes, weights=(sub.value > 0), minlength=len(distinct)).astype(np.int64)
    first = np.zeros(len(distinct), dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # a row of each key
    return _rater_state(
        sub.rater.labels[sub.rater.codes[first]],
        sub.kind.labels[sub.kind.codes[first]],
        sub.dimension.labels[sub.dimension.codes[first]],
        n,
        up,
    )


def merge_raters(a: RaterState, b: RaterState) -> RaterState:
    return _rater_state(
        np.concatenate([a.raters, b.raters]),
        np.concatenate([a.kinds, b.kinds]),
        np.concatenate([a.dimensions, b.dimensions]),
        np.concatenate([a.n, b.n]),
        np.concatenate([a.up, b.up]),
    )


def rater_figures(state: RaterState) -> list[dict[str, Any]]:
    """Per rater and dimension: labels, positive labels (thumbs up, ``winner`` = second
    candidate) and their share."""
    return [
        {"rater": r, "kind": k, "dimension": d, "n_labels": n, "n_up": up, "up_rate": up / n}
        for r, k, d, n, up in zip(
            state.raters.tolist(),
            state.kinds.tolist(),
            state.dimensions.tolist(),
            state.n.tolist(),
            state.up.tolist(),
        )
    ]


# -- thumbs: per-unit up/down counts and the KTO resolution ---------------------------------


@dataclass(frozen=True)
class ThumbColumns:
    """Per candidate (unit ``item::candidate`` of the ``unary`` rows), sorted by
    ``(item, candidate)``: thumbs up and down, and the raters (``raters[offsets[i]:offsets[i+1]]``,
    sorted)."""

    item: np.ndarray
    candidate: np.ndarray
    up: np.ndarray
    down: np.ndarray
    offsets: np.ndarray
    raters: np.ndarray


def thumb_columns(chunk: Chunk) -> ThumbColumns:
    """The chunk's thumbs per candidate, vectorized (Python work per candidate: one slice)."""
    keep = ~np.isnan(chunk.value)
    keep &= np.isin(chunk.kind.codes, np.flatnonzero(chunk.kind.labels == "unary"))
    sub = chunk.take(np.flatnonzero(keep))
    if not len(sub):
        none = np.zeros(0, dtype=object)
        ints = np.zeros(0, dtype=np.int64)
        return ThumbColumns(none, none, ints, ints, np.zeros(1, dtype=np.int64), none)
    u, unit_codes = factorize(sub.unit.codes)
    n_units = len(unit_codes)
    up = np.bincount(u, weights=(sub.value > 0).astype(np.int64), minlength=n_units).astype(
        np.int64
    )
    n = np.bincount(u, minlength=n_units)
    first = np.zeros(n_units, dtype=np.int64)
    first[u[::-1]] = np.arange(len(u))[::-1]
    items = sub.item.labels[sub.item.codes[first]]
    units = sub.unit.labels[unit_codes]
    cands = np.array(
        [str(un)[len(str(it)) + 2 :] for un, it in zip(units.tolist(), items.tolist())],
        dtype=object,
    )
    _, item_rank = np.unique(items.astype(str), return_inverse=True)
    _, cand_rank = np.unique(cands.astype(str), return_inverse=True)
    order = np.lexsort((cand_rank.reshape(-1), item_rank.reshape(-1)))
    position = np.empty(n_units, dtype=np.int64)
    position[order] = np.arange(n_units)
    # raters per candidate: distinct (candidate position, rater rank), sorted
    rater_rank = np.empty(len(sub.rater.labels), dtype=np.int64)
    rater_rank[np.argsort(sub.rater.labels.astype(str), kind="stable")] = np.arange(
        len(sub.rater.labels)
    )
    pairs = np.unique(position[u] * max(len(sub.rater.labels), 1) + rater_rank[sub.rater.codes])
    pair_unit, pair_rank = np.divmod(pairs, max(len(sub.rater.labels), 1))
    by_rank = np.empty(len(sub.rater.labels), dtype=object)
    by_rank[rater_rank] = sub.rater.labels
    offsets = np.concatenate([[0], np.cumsum(np.bincount(pair_unit, minlength=n_units))])
    return ThumbColumns(
        items[order].astype(object),
        cands[order],
        up[order],
        (n - up)[order].astype(np.int64),
        offsets.astype(np.int64),
        by_rank[pair_rank],
    )


#: ``{(item_id, candidate_id): (up, down, raters)}``
ThumbState = Mapping[tuple[str, str], tuple[int, int, frozenset[str]]]


def thumbs_from_chunk(chunk: Chunk) -> ThumbState:
    """Per-candidate thumbs as a mergeable mapping (for merging chunks that share candidates)."""
    c = thumb_columns(chunk)
    return {
        (str(c.item[i]), str(c.candidate[i])): (
            int(c.up[i]),
            int(c.down[i]),
            frozenset(str(r) for r in c.raters[c.offsets[i] : c.offsets[i + 1]].tolist()),
        )
        for i in range(len(c.up))
    }


def merge_thumbs(a: ThumbState, b: ThumbState) -> ThumbState:
    out = dict(a)
    for key, (up, down, raters) in b.items():
        if key in out:
            up0, down0, raters0 = out[key]
            out[key] = (up0 + up, down0 + down, raters0 | raters)
        else:
            out[key] = (up, down, raters)
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
    for (item, cand), (up, down, raters) in sorted(state.items()):
        if up == down:
            dropped += 1
            continue
        n = up + down
        rows.append(
            ResolvedThumb(item, cand, up > down, n, max(up, down) / n, tuple(sorted(raters)))
        )
    return rows, {"no-majority": dropped}


#: ``{"units", "labels", "up_labels", "resolved_up", "resolved_down", "no_majority"}``
ThumbSummary = Mapping[str, int]


def thumb_summary_from_chunk(chunk: Chunk) -> ThumbSummary:
    """The resolution's counts only: small enough to merge across any number of shards."""
    keep = ~np.isnan(chunk.value)
    keep &= np.isin(chunk.kind.codes, np.flatnonzero(chunk.kind.labels == "unary"))
    u, distinct = factorize(chunk.unit.codes[keep])
    positive = (chunk.value[keep] > 0).astype(np.int64)
    up = np.bincount(u, weights=positive, minlength=len(distinct)).astype(np.int64)
    down = np.bincount(u, minlength=len(distinct)) - up
    return {
        "labels": int(keep.sum()),
        "no_majority": int((up == down).sum()),
        "resolved_down": int((down > up).sum()),
        "resolved_up": int((up > down).sum()),
        "units": len(up),
        "up_labels": int(up.sum()),
    }


def merge_thumb_summary(a: ThumbSummary, b: ThumbSummary) -> ThumbSummary:
    return _sorted_counts(_add_counts(a, b))


# -- Bradley-Terry win counts ---------------------------------------------------------------

#: ``{(lo, hi, value): comparisons}`` from ``winner`` rows (value -1 lo better, 0 tie, 1 hi)
WinState = Mapping[tuple[str, str, float], int]


def wins_from_chunk(chunk: Chunk) -> WinState:
    keep = ~np.isnan(chunk.value)
    keep &= np.isin(chunk.dimension.codes, np.flatnonzero(chunk.dimension.labels == "winner"))
    rows = np.flatnonzero(keep)
    if not len(rows):
        return {}
    v, classes = factorize(chunk.value[rows])
    codes, distinct = factorize(chunk.unit.codes[rows] * len(classes) + v)
    counts = np.bincount(codes)
    unit_code, value_code = np.divmod(distinct, len(classes))
    out: dict[tuple[str, str, float], int] = {}
    for unit, value, n in zip(
        chunk.unit.labels[unit_code].tolist(), classes[value_code].tolist(), counts.tolist()
    ):
        lo, _, hi = str(unit).rpartition("::")[2].partition("|")
        key = (lo, hi, float(value))
        out[key] = out.get(key, 0) + int(n)
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
DSCountState = Mapping[tuple[Any, float], int]  # raters as given (sorted as dawid_skene sorts)


def ds_counts_from_chunk(chunk: Chunk) -> DSCountState:
    keep = ~np.isnan(chunk.value)
    if not keep.any():
        return {}
    v, classes = factorize(chunk.value[keep])
    codes, distinct = factorize(chunk.rater.codes[keep] * len(classes) + v)
    counts = np.bincount(codes)
    r, c = np.divmod(distinct, len(classes))
    return {
        (name, float(value)): int(n)
        for name, value, n in zip(
            chunk.rater.labels[r].tolist(), classes[c].tolist(), counts.tolist()
        )
    }


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


def _ds_design(chunk: Chunk, params: DSParams) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    keep = ~np.isnan(chunk.value)
    u, unit_codes = factorize(chunk.unit.codes[keep])
    global_rater = np.searchsorted(params.raters, chunk.rater.labels)
    r = global_rater[chunk.rater.codes[keep]]
    c = np.searchsorted(params.classes, chunk.value[keep])
    k = len(params.classes)
    n_u = len(unit_codes)
    design = sparse.csr_matrix(
        (np.ones(len(u)), (u, params.fit_of[r] * k + c)), shape=(n_u, params.n_fit * k)
    )
    votes = np.bincount(u * k + c, minlength=n_u * k).reshape(n_u, k).astype(float)
    units: np.ndarray = chunk.unit.labels[unit_codes]
    return design, votes, units


def _ds_posteriors(
    design: sparse.csr_matrix, votes: np.ndarray, params: DSParams
) -> tuple[np.ndarray, float]:
    if params.log_priors is None or params.log_pi is None:
        return votes / votes.sum(axis=1, keepdims=True), 0.0
    post, unit_ll = em_e_step(design, params.log_priors, params.log_pi)
    return post, float(unit_ll.sum())


def ds_posteriors(chunk: Chunk, params: DSParams) -> tuple[np.ndarray, np.ndarray]:
    """``(units, posteriors)`` of a chunk's units under ``params``."""
    design, votes, units = _ds_design(chunk, params)
    post, _ = _ds_posteriors(design, votes, params)
    return units, post


def ds_sums_from_chunk(chunk: Chunk, params: DSParams) -> DSSums:
    design, votes, _ = _ds_design(chunk, params)
    post, loglik = _ds_posteriors(design, votes, params)
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
