"""The length-bias fit with fewer temporaries (``quality/bias.py``: ``_logistic_fit``, a boolean
outcome, the design built once): the very floats of the fit it replaced (kept here as the
reference), on pairs with every twist."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.quality.bias import _logistic_slope, length_bias


def _reference_slope(x: np.ndarray, y: np.ndarray, confidence: float) -> dict[str, float]:
    """The fit as it was (main at ffa100a): a float outcome, three temporaries a call."""
    from scipy.optimize import minimize
    from scipy.stats import norm

    X = np.column_stack([np.ones_like(x), x])

    def sigmoid(z: np.ndarray) -> np.ndarray:
        p: np.ndarray = np.negative(z)
        np.exp(p, out=p)
        p += 1
        np.reciprocal(p, out=p)
        return p

    def f(beta: np.ndarray) -> tuple[float, np.ndarray]:
        z = X @ beta
        p = sigmoid(z)
        soft = np.logaddexp(0, z)
        np.multiply(y, z, out=z)
        z -= soft
        del soft
        loss = -np.sum(z)
        p -= y
        return float(loss), X.T @ p

    res = minimize(f, np.zeros(2), jac=True, method="BFGS")
    p = sigmoid(X @ res.x)
    w = 1 - p
    w *= p
    del p
    info = X.T @ (X * w[:, None])
    try:
        se = float(np.sqrt(np.linalg.inv(info)[1, 1]))
    except np.linalg.LinAlgError:
        se = float("nan")
    z = norm.ppf(1 - (1 - confidence) / 2)
    b = float(res.x[1])
    return {
        "intercept": float(res.x[0]),
        "slope": b,
        "slope_low": b - z * se,
        "slope_high": b + z * se,
        "se": se,
    }


def _reference_length_bias(c: np.ndarray, r: np.ndarray, seed: int = 0) -> dict | None:
    ok = (c > 0) & (r > 0)
    ratio = c[ok] / r[ok]
    if not len(ratio):
        return None
    rng = np.random.default_rng(seed)
    flip = rng.random(len(ratio)) < 0.5
    x = np.log(np.where(flip, 1 / ratio, ratio))
    y = (~flip).astype(float)
    if len(np.unique(y)) != 2:
        return None
    return _reference_slope(x, y, 0.95)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k] or (np.isnan(a[k]) and np.isnan(b[k])), k


@pytest.mark.parametrize(
    ("n", "seed", "shape"),
    [(2, 0, "tie"), (7, 1, "plain"), (500, 2, "plain"), (20_000, 3, "long"), (3000, 4, "zeros")],
)
def test_the_fit_takes_the_same_floats(n, seed, shape):
    rng = np.random.default_rng(seed)
    c = rng.integers(1, 400, n).astype(float)
    r = rng.integers(1, 400, n).astype(float)
    if shape == "long":
        c = c + (rng.random(n) < 0.6) * 150  # a real preference for longer answers
    if shape == "zeros":
        c[::7] = 0  # pairs left out of the ratio
    if shape == "tie":
        r = c.copy()
    got = length_bias(c, r)
    want = _reference_length_bias(c, r)
    assert ("logistic" in got) == (want is not None)
    if want is not None:
        _same(got["logistic"], want)
        if shape == "long":
            assert got["logistic"]["slope"] > 0
    # the fit of a float outcome and of the same outcome as booleans: the same floats
    x = np.log(rng.random(n) + 0.5)
    y = rng.random(n) < 0.5
    if len(np.unique(y)) == 2:
        _same(_logistic_slope(x, y, 0.95), _reference_slope(x, y.astype(float), 0.95))
        _same(_logistic_slope(x, y.astype(float), 0.95), _reference_slope(x, y.astype(float), 0.95))
