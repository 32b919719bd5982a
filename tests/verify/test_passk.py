"""pass@k (Chen et al. 2021) against a direct computation and the paper's stable form; the GRPO
group-variance share against enumeration; the aggregates and their bootstrap CIs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from preflab.verify.passk import (
    TaskCounts,
    mixed_group_share,
    pass_at_k,
    pass_at_k_stable,
    summarise,
)


def direct(n: int, c: int, k: int) -> Fraction:
    """The share of the k-subsets of n samples (c of them passing) that hold a pass."""
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(i < c for i in s) for s in subsets), len(subsets))


@pytest.mark.parametrize("n", range(1, 10))
def test_equals_enumerating_every_subset(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            expected = float(direct(n, c, k))
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)
            assert pass_at_k_stable(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_hand_made_cases():
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(2, 1, 2) == 1.0  # every pair holds the pass
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the pass rate
    # the biased estimator 1 - (1 - c/n)^k is not what is computed
    assert pass_at_k(2, 1, 2) != pytest.approx(1 - (1 - 1 / 2) ** 2)


def test_stable_form_matches_exact_binomials_at_large_n():
    for n, c, k in [(200, 3, 32), (200, 1, 1), (500, 250, 100), (1000, 7, 16), (64, 63, 32)]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k)) if n - c >= k else Fraction(1)
        assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)
        assert pass_at_k_stable(n, c, k) == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize("n, c, k", [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_invalid_counts_raise(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_at_k_stable(n, c, k)


def test_mixed_group_share_against_enumeration():
    for n in range(1, 8):
        for c in range(n + 1):
            for g in range(1, n + 1):
                groups = list(itertools.combinations(range(n), g))
                mixed = sum(any(i < c for i in s) and any(i >= c for i in s) for s in groups)
                assert mixed_group_share(n, c, g) == pytest.approx(mixed / len(groups)), (n, c, g)


def test_mixed_group_share_is_zero_exactly_for_zero_variance_tasks():
    for n in range(1, 40):
        for g in (2, 4, 8, 16, 64):
            assert mixed_group_share(n, 0, g) == 0.0
            assert mixed_group_share(n, n, g) == 0.0
            for c in range(1, n):
                assert mixed_group_share(n, c, g) > 0.0
    # a group larger than the samples: drawn with the pass rate
    assert mixed_group_share(4, 2, 8) == pytest.approx(1 - 2 * 0.5**8)


def test_summarise_per_task_domain_overall():
    counts = [
        TaskCounts("a", "math", 8, 2),
        TaskCounts("b", "math", 8, 0),
        TaskCounts("c", "code", 8, 8),
        TaskCounts("d", "code", 16, 4),
    ]
    report = summarise(counts, (1, 8, 16, 32), resamples=200, seed=3)
    assert report["ks"] == [1, 8, 16]  # 32 > every n: not reported
    assert report["tasks"]["a"]["pass@1"] == pytest.approx(0.25)
    assert "pass@16" not in report["tasks"]["a"]  # n = 8 < 16
    assert report["tasks"]["d"]["pass@16"] == 1.0
    math_ = report["domains"]["math"]
    assert math_["pass@1"]["value"] == pytest.approx((0.25 + 0) / 2)
    assert math_["pass@8"]["value"] == pytest.approx((1 + 0) / 2)
    assert "pass@16" not in math_
    overall = report["overall"]
    assert overall["pass@1"]["value"] == pytest.approx((0.25 + 0 + 1 + 0.25) / 4)
    assert overall["pass@16"] == {"value": 1.0, "ci": [1.0, 1.0], "tasks": 1}
    lo, hi = overall["pass@1"]["ci"]
    assert lo <= overall["pass@1"]["value"] <= hi and lo < hi
    # seeded: the same CIs again; another seed: other resamples
    again = summarise(counts, (1, 8, 16, 32), resamples=200, seed=3)
    assert again["overall"]["pass@1"]["ci"] == [lo, hi]


def test_bootstrap_ci_covers_the_spread_of_tasks():
    counts = [TaskCounts(f"t{i}", "d", 10, c) for i, c in enumerate([0] * 10 + [10] * 10)]
    ci = summarise(counts, (1,), resamples=2000, seed=0)["overall"]["pass@1"]["ci"]
    assert 0.25 < ci[0] < 0.5 < ci[1] < 0.75  # half the tasks solved: a wide interval
    same = [TaskCounts(f"t{i}", "d", 10, 5) for i in range(20)]
    assert summarise(same, (1,), resamples=500)["overall"]["pass@1"]["ci"] == [0.5, 0.5]
