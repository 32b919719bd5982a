"""``population_std`` is ``np.std`` bit for bit (the report's ``strength_spread`` and its
adjudication-queue threshold must not move by an ulp)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from preflab.quality.adjudication import population_std


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("n", range(1, 12))
def test_equals_numpy_bit_for_bit(n: int) -> None:
    rng = random.Random(n)
    pools = (
        lambda: float(rng.choice([-3, -2, -1, 0, 1, 2, 3])),  # strengths
        lambda: rng.uniform(-10, 10),
        lambda: rng.choice([0.1, 0.2, 1 / 3, 2 / 3, 0.7, 1e16, -1e16, 5e-324]),
    )
    for draw in pools:
        for _ in range(1500):
            values = [draw() for _ in range(n)]
            assert _same(population_std(values), float(np.std(values))), values


def test_special_values() -> None:
    for values in ([math.inf, 1.0], [-math.inf, math.inf], [math.nan, 1.0], [0.0], [1e308, -1e308]):
        with np.errstate(all="ignore"):
            assert _same(population_std(values), float(np.std(values))), values


def test_a_plain_sum_would_differ_at_eight_values() -> None:
    """Why the fast path stops at 7: from 8 values numpy sums pairwise, and a left-to-right sum
    gives another last bit on this input (the fallback keeps numpy's)."""
    values = [0.6666666666666666, -1e16, 0.6666666666666666, 0.7, 0.2, 0.1, 0.6666666666666666, 0.1]
    total = 0.0
    for v in values:
        total += v
    mean = total / 8
    plain = math.sqrt(sum((v - mean) ** 2 for v in values) / 8)
    assert plain != float(np.std(values))
    assert population_std(values) == float(np.std(values))
