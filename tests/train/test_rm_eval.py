"""The statistics of ``rm eval``: accuracy with Wilson CIs, strata, calibration, baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from preflab.train.data import Pair
from preflab.train.evaluation import (
    accuracy,
    agreement_level,
    calibration,
    evaluate_pairs,
    paired,
    tfidf_lr_deltas,
)


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_accuracy_ci_is_the_wilson_interval_of_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    result = accuracy(np.array([1.0] * 37 + [0.0] * 13))
    low, high = proportion_confint(37, 50, alpha=0.05, method="wilson")
    assert result["accuracy"] == pytest.approx(0.74)
    assert (result["low"], result["high"]) == pytest.approx((low, high), abs=1e-12)


def test_ece_by_hand():
    # confidences 0.92 (right), 0.92 (right), 0.92 (wrong), 0.62 (right); 10 bins over [0.5, 1]
    deltas = np.array([logit(0.92), logit(0.92), -logit(0.92), logit(0.62)])
    cal = calibration(deltas)
    expected = 3 / 4 * abs(2 / 3 - 0.92) + 1 / 4 * abs(1 - 0.62)  # = 0.285
    assert cal["ece"] == pytest.approx(expected)
    filled = [b for b in cal["bins"] if b["n"]]
    assert [(b["n"], round(b["confidence"], 6)) for b in filled] == [(1, 0.62), (3, 0.92)]


def test_a_perfectly_calibrated_model_has_zero_ece():
    # half the pairs at confidence 0.75 right 3 of 4 times
    deltas = np.array([logit(0.75)] * 3 + [-logit(0.75)])
    assert calibration(deltas)["ece"] == pytest.approx(0.0, abs=1e-12)


def test_tfidf_lr_learns_a_word_that_decides_preference():
    train = [Pair(f"q{i}", f"a polite answer {i}", f"a rude answer {i}") for i in range(20)]
    held = [
        Pair("x", "polite", "rude but with many more words"),
        Pair("y", "rude one", "polite one"),
    ]
    deltas = tfidf_lr_deltas(train, held)
    assert deltas[0] > 0 > deltas[1]  # "polite" wins, whatever the length


def _heldout() -> list[Pair]:
    return [
        Pair("p1", "short", "a much longer answer", domain="math", agreement=1.0, n_raters=3),
        Pair(
            "p2", "a much longer answer here", "short", domain="math", agreement=2 / 3, n_raters=3
        ),
        Pair("p3", "same size", "size same", domain=None, agreement=1.0, n_raters=1),
        Pair("p4", "one two three", "one", domain="code"),
    ]


def test_report_strata_and_baselines_on_a_fixed_example():
    held = _heldout()
    words = lambda t: len(t.split())  # noqa: E731
    report = evaluate_pairs(
        held,
        held,
        reward_chosen=[1.0, 0.0, 2.0, 1.0],
        reward_rejected=[0.0, 1.0, 1.0, 0.0],
        length=words,
    )
    rm = report["methods"]["reward_model"]
    assert rm["accuracy"] == pytest.approx(0.75) and rm["n"] == 4
    assert rm["strata"]["length"]["chosen shorter"]["accuracy"] == 1.0
    assert rm["strata"]["length"]["chosen longer"]["accuracy"] == pytest.approx(0.5)
    assert rm["strata"]["domain"]["math"]["n"] == 2 and rm["strata"]["domain"]["none"]["n"] == 1
    assert set(rm["strata"]["agreement"]) == {"unanimous", "split", "single rater", "unknown"}
    # longer-wins: p2 and p4 right, p1 wrong, p3 a tie (half a point)
    assert report["methods"]["longer_wins"]["accuracy"] == pytest.approx(2.5 / 4)
    assert report["methods"]["shorter_wins"]["accuracy"] == pytest.approx(1.5 / 4)
    assert report["length_gap"]["reward_model"] == pytest.approx(0.5)
    assert "tfidf_lr" in report["methods"]
    from scipy.stats import spearmanr

    rho = spearmanr([1.0, 0.0, 2.0, 1.0, 0.0, 1.0, 1.0, 0.0], [1, 5, 2, 3, 4, 1, 2, 1]).statistic
    assert report["spearman_reward_length"]["rho"] == pytest.approx(rho)


def test_paired_comparison_is_statsmodels_exact_mcnemar():
    from statsmodels.stats.contingency_tables import mcnemar

    # 60 pairs: both right 30, only a right 14, only b right 5, both wrong 11
    a = np.array([1.0] * 30 + [1.0] * 14 + [0.0] * 5 + [0.0] * 11)
    b = np.array([1.0] * 30 + [0.0] * 14 + [1.0] * 5 + [0.0] * 11)
    result = paired(a, b)
    reference = mcnemar([[30, 14], [5, 11]], exact=True)
    assert (result["a_only"], result["b_only"]) == (14, 5)
    assert result["difference"] == pytest.approx((44 - 35) / 60)
    assert result["p_value"] == pytest.approx(reference.pvalue, rel=1e-12)
    assert result["p_value"] < 0.07  # 14 vs 5 of 19: binomial two-sided p = 0.0636
    assert paired(b, a)["p_value"] == pytest.approx(result["p_value"])
    assert paired(a, a) == {
        "a_only": 0.0,
        "b_only": 0.0,
        "a_right_b_wrong": 0,
        "b_right_a_wrong": 0,
        "one_side_tied": 0,
        "difference": 0.0,
        "p_value": 1.0,
    }


def test_a_tie_against_a_right_answer_is_half_a_discordant_pair():
    result = paired(np.array([0.5, 1.0, 1.0]), np.array([1.0, 0.0, 1.0]))
    assert (result["a_only"], result["b_only"]) == (1.0, 0.5)
    assert result["difference"] == pytest.approx(0.5 / 3)


def test_report_compares_the_reward_model_with_each_baseline_pair_by_pair():
    held = _heldout()
    report = evaluate_pairs(
        held,
        held,
        reward_chosen=[1.0, 0.0, 2.0, 1.0],
        reward_rejected=[0.0, 1.0, 1.0, 0.0],
        length=lambda t: len(t.split()),
    )
    assert set(report["versus"]) == {"longer_wins", "shorter_wins", "tfidf_lr"}
    versus = report["versus"]["longer_wins"]
    # RM points 1, 0, 1, 1; longer-wins 0, 1, 0.5, 1
    assert (versus["a_only"], versus["b_only"]) == (1.5, 1.0)
    assert versus["difference"] == pytest.approx(
        report["methods"]["reward_model"]["accuracy"] - report["methods"]["longer_wins"]["accuracy"]
    )


def test_agreement_levels():
    assert agreement_level(Pair("p", "a", "b", agreement=1.0, n_raters=3)) == "unanimous"
    assert agreement_level(Pair("p", "a", "b", agreement=0.5, n_raters=4)) == "split"
    assert agreement_level(Pair("p", "a", "b", agreement=1.0, n_raters=1)) == "single rater"
    assert agreement_level(Pair("p", "a", "b")) == "unknown"


def test_rl_report_reads_reward_length_and_kl_per_logged_step():
    from preflab.train.report import render_rl_html
    from preflab.train.rl import overoptimisation

    logs = [
        {"step": 1, "kl": 0.0, "reward": 0.1, "completions/mean_length": 10.0, "loss": 0.0},
        {"step": 2, "kl": 0.5, "reward": 0.9, "completions/mean_length": 30.0},
        {"train_runtime": 3.0},
    ]
    report = overoptimisation(logs, beta=0.04)
    assert [s["step"] for s in report["steps"]] == [1, 2]
    assert report["trend"] == {
        "kl": pytest.approx(0.5),
        "reward": pytest.approx(0.8),
        "length": pytest.approx(20.0),
        # monitors a run did not log (an RM-only run's entropy, drift) are None, not 0
        "entropy": None,
        "zero_variance_share": None,
        "language_drift": None,
    }
    html = render_rl_html(report)
    assert (
        html.count("<svg") == 5
        and "<script" not in html
        and "http" not in html.replace("http://www.w3.org", "")
    )
