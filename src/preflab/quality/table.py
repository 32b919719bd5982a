"""The long label table the quality engine works on.

Every judgment reduces to rows ``(item, unit, rater, dimension, value, kind)`` (see
:meth:`preflab.schema.JudgmentBase.label_rows`); :class:`LabelTable` holds them as parallel
numpy arrays, optionally with a ``batch`` column, so that every statistic in
``preflab.quality`` takes plain arrays and never touches a database.

>>> t = LabelTable.from_arrays(units=["u1", "u1", "u2"], raters=["a", "b", "a"], values=[1, 1, 0])
>>> len(t), t.raters.tolist()
(3, ['a', 'b', 'a'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from preflab.schema import JudgmentBase


def as_array(values: Any, name: str, n: int | None = None, dtype: Any = None) -> np.ndarray:
    """``values`` as a 1-D array, with an error that names the column when the length is off."""
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and len(arr) != n:
        raise ValueError(
            f"{name} has {len(arr)} entries but the label table has {n} rows: "
            "pass one entry per label row"
        )
    return arr


def factorize(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes ``0..k-1`` and the sorted unique values (``np.unique`` with inverse)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" and len(arr) and arr.min() >= 0 and arr.max() < 4 * len(arr) + 1024:
        # small non-negative integers: a presence table instead of a sort
        present = np.zeros(int(arr.max()) + 1, dtype=bool)
        present[arr] = True
        uniques = np.flatnonzero(present).astype(arr.dtype)
        lookup = np.cumsum(present) - 1
        return lookup[arr].astype(np.int64), uniques
    uniques, codes = np.unique(arr, return_inverse=True)
    return codes.reshape(-1).astype(np.int64, copy=False), uniques


@dataclass
class LabelTable:
    """Parallel columns of the long label table.

    ``units``, ``raters`` and ``values`` are required; ``items``, ``dimensions``, ``kinds`` and
    ``batches`` default to the unit, ``"value"``, ``"label"`` and ``"all"``. ``values`` is float
    with ``NaN`` for a missing label.
    """

    units: np.ndarray
    raters: np.ndarray
    values: np.ndarray
    items: np.ndarray
    dimensions: np.ndarray
    kinds: np.ndarray
    batches: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def from_arrays(
        cls,
        units: Sequence[Any] | np.ndarray,
        raters: Sequence[Any] | np.ndarray,
        values: Sequence[float] | np.ndarray,
        items: Sequence[Any] | np.ndarray | None = None,
        dimensions: Sequence[Any] | np.ndarray | None = None,
        kinds: Sequence[Any] | np.ndarray | None = None,
        batches: Sequence[Any] | np.ndarray | None = None,
    ) -> LabelTable:
        vals = as_array(values, "values", dtype=float)
        n = len(vals)
        u = as_array(units, "units", n)
        r = as_array(raters, "raters", n)

        def col(x: Any, name: str, default: Any) -> np.ndarray:
            if x is None:
                return (
                    np.full(n, default, dtype=object)
                    if not isinstance(default, np.ndarray)
                    else default
                )
            return as_array(x, name, n)

        return cls(
            units=u,
            raters=r,
            values=vals,
            items=col(items, "items", u),
            dimensions=col(dimensions, "dimensions", "value"),
            kinds=col(kinds, "kinds", "label"),
            batches=col(batches, "batches", "all"),
        )

    @classmethod
    def from_judgments(
        cls,
        judgments: Iterable[JudgmentBase],
        batches: Mapping[str, Any] | Callable[[JudgmentBase], Any] | None = None,
    ) -> LabelTable:
        """Rows of every judgment's :meth:`label_rows`.

        ``batches`` maps an item id to its batch, or is a function of the judgment.
        """
        cols: dict[str, list[Any]] = {k: [] for k in ("u", "r", "v", "i", "d", "k", "b")}
        for j in judgments:
            if batches is None:
                batch = "all"
            elif callable(batches):
                batch = batches(j)
            else:
                batch = batches.get(j.item_id, "all")
            for row in j.label_rows():
                cols["u"].append(row.unit)
                cols["r"].append(row.rater)
                cols["v"].append(row.value)
                cols["i"].append(row.item_id)
                cols["d"].append(row.dimension)
                cols["k"].append(row.kind)
                cols["b"].append(str(batch))
        return cls(
            units=_objects(cols["u"]),
            raters=_objects(cols["r"]),
            values=np.array(cols["v"], dtype=float),
            items=_objects(cols["i"]),
            dimensions=_objects(cols["d"]),
            kinds=_objects(cols["k"]),
            batches=_objects(cols["b"]),
        )

    def where(self, mask: np.ndarray) -> LabelTable:
        """The rows where ``mask`` is true."""
        mask = as_array(mask, "mask", len(self), dtype=bool)
        return LabelTable(
            units=self.units[mask],
            raters=self.raters[mask],
            values=self.values[mask],
            items=self.items[mask],
            dimensions=self.dimensions[mask],
            kinds=self.kinds[mask],
            batches=self.batches[mask],
            extra={k: v[mask] for k, v in self.extra.items()},
        )

    def select(
        self, kind: str | None = None, dimension: str | None = None, batch: Any = None
    ) -> LabelTable:
        mask = np.ones(len(self), dtype=bool)
        if kind is not None:
            mask &= self.kinds == kind
        if dimension is not None:
            mask &= self.dimensions == dimension
        if batch is not None:
            mask &= self.batches == batch
        return self.where(mask)

    def groups(self) -> list[tuple[str, str, str]]:
        """Distinct ``(batch, kind, dimension)`` triples, sorted."""
        keys = {
            (str(b), str(k), str(d)) for b, k, d in zip(self.batches, self.kinds, self.dimensions)
        }
        return sorted(keys)


def unit_rater_matrix(
    units: Any, raters: Any, values: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ``raters x units`` matrix (NaN = missing) and the rater and unit labels.

    When a rater labelled a unit twice the last label wins.
    """
    vals = as_array(values, "values", dtype=float)
    n = len(vals)
    u_codes, u_labels = factorize(as_array(units, "units", n))
    r_codes, r_labels = factorize(as_array(raters, "raters", n))
    mat = np.full((len(r_labels), len(u_labels)), np.nan)
    mat[r_codes, u_codes] = vals
    return mat, r_labels, u_labels


def matrix_to_long(data: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``raters x units`` reliability data (NaN or None = missing) to long ``(units, raters, values)``."""
    mat = np.array(data, dtype=float)
    if mat.ndim != 2:
        raise ValueError(f"reliability data must be a raters x units matrix, got shape {mat.shape}")
    r, u = np.nonzero(~np.isnan(mat))
    return u, r, mat[r, u]


def time_window_batches(window: timedelta) -> Callable[[JudgmentBase], str]:
    """Batch judgments by the time window their submission falls in, for ``from_judgments``.

    Windows are aligned to the Unix epoch in UTC (``window=timedelta(days=7)`` gives fixed weekly
    windows), labelled ``"<start>/<end>"`` in ISO 8601; judgments without ``submitted_at`` go to
    ``"undated"``.

    >>> from preflab.schema import UnaryJudgment
    >>> j = UnaryJudgment(item_id="i", candidate_id="a", label=True,
    ...                   provenance={"rater_id": "r", "submitted_at": "2026-01-02T10:00:00Z"})
    >>> time_window_batches(timedelta(days=1))(j)
    '2026-01-02T00:00:00+00:00/2026-01-03T00:00:00+00:00'
    """
    if window <= timedelta(0):
        raise ValueError(f"window must be positive, got {window}")
    epoch = datetime(1970, 1, 1, tzinfo=UTC)

    def batch(judgment: JudgmentBase) -> str:
        at = judgment.provenance.submitted_at
        if at is None:
            return "undated"
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        start = epoch + window * ((at - epoch) // window)
        return f"{start.isoformat()}/{(start + window).isoformat()}"

    return batch


def _objects(values: list[Any]) -> np.ndarray:
    """An object array: strings stay Python strings (no fixed-width numpy unicode)."""
    return np.array(values, dtype=object)
