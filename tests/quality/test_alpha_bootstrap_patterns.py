"""``krippendorff_alpha_ci`` resamples units through their distinct count rows (patterns): the
same draws (one ``rng.integers`` call a replicate) and the same interval as the bootstrap that
weights every unit (the reference below: the loop as it was), to 1e-12; exactly where every
unit's ``m - 1`` is a power of two."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.quality.agreement import krippendorff as kr
from preflab.quality.agreement.krippendorff import (
    BootstrapCI,
    alpha_from_coincidence,
    coincidences,
    krippendorff_alpha_ci,
)


def reference_ci(units, values, level, n_boot, confidence=0.95, seed=0) -> BootstrapCI:
    co = coincidences(units, values)
    n_units = co.counts.shape[0]
    estimate = alpha_from_coincidence(co.matrix(), co.domain, level)
    rng = np.random.default_rng(seed)
    samples = np.empty(n_boot)
    for b in range(n_boot):
        w = np.bincount(rng.integers(0, n_units, n_units), minlength=n_units).astype(float)
        samples[b] = alpha_from_coincidence(co.matrix(w), co.domain, level)
    samples = samples[~np.isnan(samples)]
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return BootstrapCI(estimate, float(low), float(high), confidence, int(len(samples)))


def table(n_units: int, raters: list[int], domain: np.ndarray, seed: int):
    """A long table: unit ``u`` gets ``raters[u % len(raters)]`` values drawn from ``domain``
    (mostly one value per unit, for agreement), some missing."""
    rng = np.random.default_rng(seed)
    units, values = [], []
    for u in range(n_units):
        m = raters[u % len(raters)]
        truth = rng.choice(domain)
        vals = np.where(rng.random(m) < 0.7, truth, rng.choice(domain, m))
        units += [f"u{u}"] * m
        values += vals.tolist()
    values = np.array(values, dtype=float)
    values[rng.random(len(values)) < 0.05] = np.nan
    return np.array(units, dtype=object), values


def close(a: BootstrapCI, b: BootstrapCI, tol: float) -> None:
    assert a.n_boot == b.n_boot
    for x, y in ((a.estimate, b.estimate), (a.low, b.low), (a.high, b.high)):
        assert abs(x - y) <= tol * max(1.0, abs(x), abs(y)), (a, b)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("raters", [[2], [3], [2, 3, 5], [4, 2, 7, 3]])
def test_same_interval_as_weighting_every_unit(level, raters):
    units, values = table(600, raters, np.arange(1.0, 6.0), seed=len(raters))
    got = krippendorff_alpha_ci(units, values, level, n_boot=60, seed=3)
    want = reference_ci(units, values, level, n_boot=60, seed=3)
    if set(raters) <= {2, 3}:  # m - 1 in {1, 2} (missing values too): every sum exact
        assert got == want
    close(got, want, 1e-12)


def test_many_patterns_and_wide_rows():
    # continuous values: hundreds of patterns (a uint16 pattern number) and rows too wide to be
    # read as one integer (70 distinct values: records compared)
    units, values = table(900, [2, 3, 4], np.round(np.linspace(0, 1, 70), 3), seed=5)
    assert len(np.unique(values[~np.isnan(values)])) > kr.DENSE_DOMAIN - 10
    for level in ("interval", "nominal"):
        close(
            krippendorff_alpha_ci(units, values, level, n_boot=40, seed=1),
            reference_ci(units, values, level, n_boot=40, seed=1),
            1e-12,
        )


def test_domain_over_the_dense_bound_keeps_the_unit_weights():
    units, values = table(300, [2, 3], np.arange(100.0), seed=2)
    co = coincidences(units, values)
    assert co.counts.shape[1] > kr.DENSE_DOMAIN and co.pattern_resampler() is None
    assert krippendorff_alpha_ci(units, values, "interval", n_boot=30) == reference_ci(
        units, values, "interval", n_boot=30
    )


def test_row_groups_number_equal_rows_alike():
    rng = np.random.default_rng(0)
    for width in (3, 60):  # one integer a row; records
        dense = rng.integers(0, 3, (500, width)).astype(float)
        dense[::7] = dense[3]
        group, first = kr._row_groups(dense)
        assert (dense[first][group] == dense).all()
        assert len(first) == len(np.unique(dense, axis=0))
        assert group.dtype == (np.uint8 if len(first) <= 256 else np.uint16)


def test_uint32_draws_are_the_int64_draws(monkeypatch):
    # this numpy draws them alike (the bootstrap's fast draws are in use); without them, the
    # same interval
    assert kr._uint32_draws_alike()
    units, values = table(500, [3, 4], np.arange(1.0, 4.0), seed=7)
    fast = krippendorff_alpha_ci(units, values, "ordinal", n_boot=50, seed=2)
    monkeypatch.setattr(kr, "_uint32_draws_alike", lambda: False)
    assert krippendorff_alpha_ci(units, values, "ordinal", n_boot=50, seed=2) == fast
    close(fast, reference_ci(units, values, "ordinal", n_boot=50, seed=2), 1e-12)
