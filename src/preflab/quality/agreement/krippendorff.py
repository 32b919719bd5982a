"""Krippendorff's alpha from the long label table, via the coincidence matrix.

Krippendorff, K. (2011). *Computing Krippendorff's Alpha-Reliability*. Annenberg School for
Communication, University of Pennsylvania. https://repository.upenn.edu/asc_papers/43

    alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_ck o_ck d2_ck / sum_ck n_c n_k d2_ck

where ``o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1)`` is the coincidence matrix over
*pairable* units (``m_u >= 2`` values), ``n_c`` its margins and ``n = sum_c n_c``. Missing
values are simply absent rows (or NaN), so sparse designs cost nothing.

The coincidence matrix is built as ``N^T D N`` with ``N`` the sparse ``units x values`` count
matrix and ``D = diag(1 / (m_u - 1))``: one sparse product, no Python loop over units.

Worked example (Krippendorff 2011, section C: two observers, binary data, 10 units)::

    >>> a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    >>> b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    >>> round(alpha_from_matrix([a, b], "nominal"), 3)
    0.095
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from scipy import sparse

from ..table import as_array, factorize, matrix_to_long

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS = ("nominal", "ordinal", "interval", "ratio")
#: Most distinct values for which the bootstrap holds the unit x value counts dense.
DENSE_DOMAIN = 64


def as_level(value: str) -> Level:
    """``value`` as a measurement level, or a ``ValueError`` naming the accepted ones."""
    if value not in LEVELS:
        raise ValueError(f"unknown level {value!r}: use one of {', '.join(LEVELS)}")
    return cast(Level, value)


@dataclass(frozen=True)
class Coincidences:
    """Sparse counts of a label table, enough to compute alpha (and to resample units)."""

    counts: sparse.csr_matrix  # units x values, n_uc (pairable units only)
    m: np.ndarray  # values per pairable unit
    domain: np.ndarray  # sorted distinct values

    def matrix(self, unit_weights: np.ndarray | None = None) -> np.ndarray:
        """The coincidence matrix ``o`` (optionally with a weight per unit, for the bootstrap)."""
        scale = 1.0 / (self.m - 1.0)
        if unit_weights is not None:
            scale = scale * unit_weights
        weighted = sparse.diags(scale) @ self.counts
        o = (self.counts.T @ weighted).toarray()
        o[np.diag_indices_from(o)] -= np.asarray(weighted.sum(axis=0)).ravel()
        result: np.ndarray = o
        return result

    def resampler(self) -> Callable[[np.ndarray], np.ndarray]:
        """``matrix(w)`` for many weight vectors (the bootstrap's): with a small domain the
        counts are held dense and each matrix is one product of a units x values array (the
        same sums, in another order: equal to rounding, ~1e-16 relative)."""
        if self.counts.shape[1] > DENSE_DOMAIN:
            return self.matrix
        dense = self.counts.toarray()
        scale = 1.0 / (self.m - 1.0)

        def matrix(unit_weights: np.ndarray) -> np.ndarray:
            ws = scale * unit_weights
            weighted_t = dense.T * ws
            o: np.ndarray = weighted_t @ dense
            o[np.diag_indices_from(o)] -= weighted_t.sum(axis=1)
            return o

        return matrix

    def pattern_resampler(self) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]] | None:
        """The bootstrap's resampler over the units' distinct count rows (*patterns*): ``(group,
        matrix)`` with ``group[u]`` unit ``u``'s pattern and ``matrix(w)`` the coincidence
        matrix of ``w[p]`` units of each pattern ``p``; None where the counts are not held
        dense (:meth:`resampler`'s bound).

        A resampled matrix is the sum over units of (times drawn) x (the unit's contribution),
        and units of one pattern contribute the same: with the drawn units' patterns counted
        (``bincount(group[draws])``) it is :meth:`resampler`'s product over a few dozen rows,
        not one per unit (the same sums up to their order: equal to rounding, exact where
        ``m - 1`` is a power of two, as with two or three values a unit)."""
        if self.counts.shape[1] > DENSE_DOMAIN:
            return None
        dense = self.counts.toarray()
        group, first = _row_groups(dense)
        rows = dense[first]
        # a pattern's values: its row's sum (the counts are a pairable unit's every value)
        patterns = Coincidences(sparse.csr_matrix(rows), rows.sum(axis=1), self.domain)
        matrix = patterns.resampler()
        return group, matrix


@functools.lru_cache(maxsize=1)
def _uint32_draws_alike() -> bool:
    """Whether ``Generator.integers(0, n, size)`` draws the same numbers as uint32 as it does as
    int64 (its default) for ``n`` below 2**32: numpy draws both from one 32-bit bounded
    generator (Lemire's method on the bit generator's 32-bit output), the uint32 array twice
    as fast to fill. Checked once on this numpy, on bounds with rejections and without; if a
    numpy draws them otherwise, the bootstrap draws int64 as before."""
    for n in (1, 3, 1000, 83_334, 2**31 + 11, 2**32 - 1):
        as_int64 = np.random.default_rng(2024).integers(0, n, 4099)
        as_uint32 = np.random.default_rng(2024).integers(0, n, 4099, dtype=np.uint32)
        if not np.array_equal(as_int64, as_uint32):
            return False
    return True


def _row_groups(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(group, first)``: the rows of ``dense`` (small non-negative integer counts) numbered by
    their distinct values, and a row of each number (its first). A row is read as one integer,
    its counts as digits (``np.unique`` of rows sorts them as records: ~10x slower); rows too
    wide for that are compared as records."""
    n, v = dense.shape
    base = float(dense.max()) + 1.0 if dense.size else 1.0
    if base**v < 2**53:
        key = dense @ base ** np.arange(v, dtype=float)  # exact: integers below 2**53
        _, first, group = np.unique(key, return_index=True, return_inverse=True)
    else:
        _, first, group = np.unique(dense, axis=0, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    # the narrowest type: the bootstrap gathers a replicate's patterns from it (~3x faster
    # from one byte a unit than from eight, bincount included)
    small = np.uint8 if len(first) <= 256 else np.uint16 if len(first) <= 65536 else np.intp
    return group.astype(small), first


def coincidences(units: Any, values: Any) -> Coincidences:
    """Count values per unit, keeping pairable units (two or more non-missing values)."""
    vals = as_array(values, "values", dtype=float)
    u = as_array(units, "units", len(vals))
    keep = ~np.isnan(vals)
    vals, u = vals[keep], u[keep]
    if len(vals) == 0:
        return Coincidences(sparse.csr_matrix((0, 0)), np.zeros(0), np.zeros(0))
    u_codes, _ = factorize(u)
    m_all = np.bincount(u_codes)
    pairable = m_all[u_codes] >= 2
    u_codes, vals = u_codes[pairable], vals[pairable]
    domain, v_codes = np.unique(vals, return_inverse=True)
    v_codes = v_codes.reshape(-1)
    # renumber the pairable units densely
    kept_units = np.flatnonzero(m_all >= 2)
    remap = np.full(len(m_all), -1, dtype=np.int64)
    remap[kept_units] = np.arange(len(kept_units))
    u_codes = remap[u_codes]
    counts = sparse.csr_matrix(
        (np.ones(len(vals)), (u_codes, v_codes)), shape=(len(kept_units), len(domain))
    )
    counts.sum_duplicates()
    return Coincidences(counts, m_all[kept_units].astype(float), domain)


def distance_matrix(level: Level, domain: np.ndarray, n_c: np.ndarray) -> np.ndarray:
    """Squared difference ``d2_ck`` between the values of ``domain`` for a measurement level."""
    c = domain[:, None]
    k = domain[None, :]
    if level == "nominal":
        result: np.ndarray = (c != k).astype(float)
        return result
    if level == "interval":
        result = (c - k) ** 2
        return result
    if level == "ratio":
        total = c + k
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(total == 0, 0.0, ((c - k) / np.where(total == 0, 1.0, total)) ** 2)
        return d
    if level == "ordinal":
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        i = np.arange(len(domain))
        lo = np.minimum(i[:, None], i[None, :])
        hi = np.maximum(i[:, None], i[None, :])
        between = cum[hi + 1] - cum[lo]  # sum of n_g for g in [lo, hi]
        result = (between - (n_c[lo] + n_c[hi]) / 2.0) ** 2
        return result
    raise ValueError(f"unknown level {level!r}: use one of {', '.join(LEVELS)}")


def alpha_from_coincidence(o: np.ndarray, domain: np.ndarray, level: Level) -> float:
    """Alpha from a coincidence matrix; NaN when undefined (fewer than two distinct values)."""
    n_c = o.sum(axis=0)
    n = n_c.sum()
    if n <= 1:
        return float("nan")
    d2 = distance_matrix(level, domain, n_c)
    expected = n_c @ d2 @ n_c
    if expected <= 0:
        return float("nan")
    observed = float((o * d2).sum())
    return float(1.0 - (n - 1.0) * observed / expected)


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}: use one of {', '.join(LEVELS)}")


def krippendorff_alpha(units: Any, values: Any, level: Level = "nominal") -> float:
    """Krippendorff's alpha of a long table: one row per label, ``units[i]`` labelled ``values[i]``.

    Rows with a NaN value and units with fewer than two values are ignored (they are not
    pairable). Returns NaN when alpha is undefined (no pairable unit or one distinct value).

    >>> krippendorff_alpha(["u1", "u1", "u2", "u2", "u3", "u3"], [1, 1, 2, 2, 1, 2])
    0.4444444444444444
    """
    _check_level(level)
    co = coincidences(units, values)
    if co.counts.shape[0] == 0:
        return float("nan")
    if len(co.domain) > MAX_DENSE_DOMAIN:
        return _alpha_without_matrix(co, level)
    return alpha_from_coincidence(co.matrix(), co.domain, level)


#: Above this many distinct values the ``values x values`` matrix is not built.
MAX_DENSE_DOMAIN = 4096


def _alpha_without_matrix(co: Coincidences, level: Level) -> float:
    """Nominal and interval alpha from per-unit moments, for very many distinct values."""
    inv = 1.0 / (co.m - 1.0)
    n = co.m.sum()
    n_c = np.asarray(co.counts.sum(axis=0)).ravel()
    if level == "nominal":
        cnt = co.counts.copy()
        cnt.data = cnt.data * (cnt.data - 1.0)
        within = np.asarray(cnt.sum(axis=1)).ravel() @ inv
        observed = n - within
        expected = n * n - (n_c**2).sum()
    elif level == "interval":
        s1 = co.counts @ co.domain
        s2 = co.counts @ co.domain**2
        observed = (2.0 * (co.m * s2 - s1**2)) @ inv
        expected = 2.0 * (n * (n_c @ co.domain**2) - (n_c @ co.domain) ** 2)
    else:
        raise ValueError(
            f"{len(co.domain)} distinct values is too many for {level} alpha "
            f"(limit {MAX_DENSE_DOMAIN}); round or bin the values first"
        )
    if expected <= 0:
        return float("nan")
    return float(1.0 - (n - 1.0) * observed / expected)


def alpha_from_matrix(data: Any, level: Level = "nominal") -> float:
    """Alpha of ``raters x units`` reliability data (NaN = missing), like ``krippendorff.alpha``."""
    u, _, v = matrix_to_long(data)
    return krippendorff_alpha(u, v, level)


@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate with a percentile bootstrap interval."""

    estimate: float
    low: float
    high: float
    confidence: float
    n_boot: int

    def as_dict(self) -> dict[str, float]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "n_boot": self.n_boot,
        }


def krippendorff_alpha_ci(
    units: Any,
    values: Any,
    level: Level = "nominal",
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> BootstrapCI:
    """Alpha with a percentile bootstrap interval from resampling *units* with replacement.

    Each replicate draws as many pairable units as there are, with replacement, and recomputes
    the coincidence matrix with those multiplicities (so the expected disagreement is re-estimated
    too). Replicates where alpha is undefined are dropped.
    """
    _check_level(level)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    co = coincidences(units, values)
    n_units = co.counts.shape[0]
    if n_units == 0:
        nan = float("nan")
        return BootstrapCI(nan, nan, nan, confidence, 0)
    estimate = alpha_from_coincidence(co.matrix(), co.domain, level)
    rng = np.random.default_rng(seed)
    samples = np.empty(n_boot)
    grouped = co.pattern_resampler()
    if grouped is None:
        resample = co.resampler()
        for b in range(n_boot):
            w = np.bincount(rng.integers(0, n_units, n_units), minlength=n_units).astype(float)
            samples[b] = alpha_from_coincidence(resample(w), co.domain, level)
    else:
        # the same draws (one ``integers`` call a replicate, as above), counted by pattern
        group, resample = grouped
        n_patterns = int(group.max()) + 1
        small = np.uint32 if n_units < 2**32 and _uint32_draws_alike() else np.int64
        for b in range(n_boot):
            drawn = group[rng.integers(0, n_units, n_units, dtype=small)]
            w = np.bincount(drawn, minlength=n_patterns).astype(float)
            samples[b] = alpha_from_coincidence(resample(w), co.domain, level)
    samples = samples[~np.isnan(samples)]
    if len(samples) == 0:
        nan = float("nan")
        return BootstrapCI(estimate, nan, nan, confidence, 0)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return BootstrapCI(estimate, float(low), float(high), confidence, int(len(samples)))
