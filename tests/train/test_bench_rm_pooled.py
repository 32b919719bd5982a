"""``benchmarks/bench_rm.py``'s pooled figure: accuracies over several seeds' held-out splits
counted as one set of pairs (what methods are compared by when one split's interval is wide)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_rm

from preflab.quality.gold import wilson_interval


def _method(acc: float, n: int, longer: tuple[float, int], shorter: tuple[float, int]) -> dict:
    strata = {
        "chosen longer": {"accuracy": longer[0], "n": longer[1]},
        "chosen shorter": {"accuracy": shorter[0], "n": shorter[1]},
    }
    return {"accuracy": acc, "n": n, "strata": {"length": strata}}


def test_pooled_counts_the_pairs_of_every_seed_together() -> None:
    runs = [
        {"methods": {"reward_model": _method(0.5, 100, (0.6, 50), (0.4, 50))}},
        {"methods": {"reward_model": _method(0.7, 300, (0.8, 100), (0.65, 200))}},
    ]
    rm = bench_rm.pooled(runs)["reward_model"]
    assert rm["n"] == 400 and rm["accuracy"] == pytest.approx((50 + 210) / 400)
    assert (rm["low"], rm["high"]) == pytest.approx(wilson_interval(260, 400))
    longer, shorter = (
        rm["strata"]["length"]["chosen longer"],
        rm["strata"]["length"]["chosen shorter"],
    )
    assert longer["accuracy"] == pytest.approx((30 + 80) / 150)
    assert shorter["accuracy"] == pytest.approx((20 + 130) / 250)
    assert bench_rm._gap(rm) == pytest.approx(abs(110 / 150 - 150 / 250))


def test_pooled_versus_counts_every_splits_discordant_pairs_together() -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    method = _method(0.5, 100, (0.6, 50), (0.4, 50))
    runs = [
        {"methods": {"reward_model": method}, "versus": {"tfidf_lr": {"a_only": 9, "b_only": 4}}},
        {"methods": {"reward_model": method}, "versus": {"tfidf_lr": {"a_only": 7, "b_only": 2}}},
    ]
    versus = bench_rm.pooled(runs)["versus"]["tfidf_lr"]
    assert (versus["a_only"], versus["b_only"]) == (16, 6)
    # the diagonal does not enter the exact test: any both-right / both-wrong counts do
    assert versus["p_value"] == pytest.approx(mcnemar([[50, 16], [6, 28]], exact=True).pvalue)
