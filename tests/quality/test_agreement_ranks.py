"""An agreement row's kept units passed to the agreement functions as their names' ranks
(``accumulate._long``) instead of the names: alpha with its bootstrap interval, percent
agreement and Gwet's AC identical bit for bit (the functions read units only through
``factorize``, whose codes of the ranks are the ranks, as its codes of the names are)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from preflab.quality.accumulate import _long
from preflab.quality.agreement.gwet import gwet_ac
from preflab.quality.agreement.krippendorff import krippendorff_alpha_ci
from preflab.quality.agreement.percent import percent_agreement


def names_long(
    names: list[str], patterns: list[tuple[float, ...]]
) -> tuple[np.ndarray, np.ndarray]:
    arr = np.empty(len(names), dtype=object)
    arr[:] = names
    lengths = [len(p) for p in patterns]
    return np.repeat(arr, lengths), np.array([x for p in patterns for x in p], dtype=float)


@pytest.mark.parametrize("seed", range(6))
def test_ranks_give_the_names_figures(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 50, 700])
    # names out of order, of several lengths and scripts (str order: code points), and (seed
    # 3) a name twice, as a unit fed twice would be
    names = [f"{rng.choice(['q', 'Q', 'é', '東'])}{rng.randint(0, 10**6)}::a|b" for _ in range(n)]
    if seed == 3 and n > 1:
        names[-1] = names[0]
    values = [-1.0, 0.0, 1.0] if seed % 2 else [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 0.5]
    patterns = [
        tuple(sorted(rng.choice(values) for _ in range(rng.randint(1, 4)))) for _ in range(n)
    ]
    units, vals = _long(names, patterns)
    assert units.dtype == np.int64
    ref_units, ref_vals = names_long(names, patterns)
    assert np.array_equal(vals, ref_vals)
    for level in ("nominal", "ordinal", "interval"):
        a = krippendorff_alpha_ci(ref_units, ref_vals, level, n_boot=40, seed=0)
        b = krippendorff_alpha_ci(units, vals, level, n_boot=40, seed=0)
        assert repr(a) == repr(b)
    assert repr(percent_agreement(ref_units, ref_vals)) == repr(percent_agreement(units, vals))
    for w in (None, "linear", "quadratic"):
        assert repr(gwet_ac(ref_units, ref_vals, w)) == repr(gwet_ac(units, vals, w))
