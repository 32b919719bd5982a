"""The length-bias fit in fewer temporaries, and the sampled pairs as numpy columns, give the
same floats as before (the report's peak at 10M judgments: docs/benchmarks.md)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

from preflab.quality.accumulate import ReportAccumulator, Reservoir
from preflab.quality.bias import _logistic_slope, length_bias


def reference_slope(x: np.ndarray, y: np.ndarray, confidence: float) -> dict[str, float]:
    """``_logistic_slope`` as it was written before the temporaries were trimmed."""
    X = np.column_stack([np.ones_like(x), x])

    def f(beta: np.ndarray) -> tuple[float, np.ndarray]:
        z = X @ beta
        p = 1 / (1 + np.exp(-z))
        loss = -np.sum(y * z - np.logaddexp(0, z))
        return float(loss), X.T @ (p - y)

    res = minimize(f, np.zeros(2), jac=True, method="BFGS")
    p = 1 / (1 + np.exp(-(X @ res.x)))
    info = X.T @ (X * (p * (1 - p))[:, None])
    se = float(np.sqrt(np.linalg.inv(info)[1, 1]))
    z = norm.ppf(1 - (1 - confidence) / 2)
    b = float(res.x[1])
    return {
        "intercept": float(res.x[0]),
        "slope": b,
        "slope_low": b - z * se,
        "slope_high": b + z * se,
        "se": se,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("bias", [0.0, 0.8])
def test_logistic_slope_is_the_same_floats(seed: int, bias: float) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.7, 5000)
    y = (rng.random(5000) < 1 / (1 + np.exp(-bias * x))).astype(float)
    assert _logistic_slope(x, y, 0.95) == reference_slope(x, y, 0.95)


def test_sampled_pairs_as_columns_equal_the_lists() -> None:
    """Above ``bounds.pairs`` the sample goes to ``length_bias`` as float columns: the same
    figures as the lists of :meth:`length_pairs` give."""
    rng = np.random.default_rng(5)
    chosen = rng.integers(1, 400, 3000)
    rejected = rng.integers(1, 400, 3000)
    acc = ReportAccumulator()
    acc.pair_sample = Reservoir(3000, typecode="q")
    acc.pair_sample.items = array("q", (chosen << 32 | rejected).tolist())
    acc.pair_sample.seen = 9000
    acc.pair_sums = [9000, 8000, 4100]
    out = acc._length()
    want = length_bias(*acc.length_pairs())
    assert out["sample"] == {"pairs": 3000, "of": 9000}
    assert out["ratio_quantiles"] == want["ratio_quantiles"]
    assert out["logistic"] == want["logistic"]
    assert (out["n_pairs"], out["n_differ"]) == (9000, 8000)
    assert out["share_chosen_longer"] == 4100 / 8000
