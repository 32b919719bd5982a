"""Arena statistics against their published references.

Ratings: FastChat's ``compute_mle_elo`` as published in the Chatbot Arena notebook (Dec 2023,
https://colab.research.google.com/drive/1KdwokPjirkTmpO_P1WByFNFiqxWQquwH, "Chatbot Arena: New
models & Elo system update", lmsys.org/blog/2023-12-07-leaderboard; the same method lived in
``fastchat/serve/monitor/elo_analysis.py`` as ``compute_elo_mle_with_tie`` until FastChat commit
e208d567): logistic regression without intercept on a design of +ln(10) for model_a and -ln(10)
for model_b, every battle duplicated, y = 1 for an A win in both copies, a tie a win in the
first copy only (half a win each), rating = 400 * coef + 1000. Written here from that
description with scikit-learn, not copied.
Wilson intervals: statsmodels ``proportion_confint(method="wilson")``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from preflab.evaluate.arena import (
    NotIdentifiable,
    arena_ratings,
    bt_ratings,
    encode,
    pair_record,
)


def fixed_battles(seed: int = 7, n: int = 400) -> list[tuple[str, str, str]]:
    """Four models with true strengths, ties ~15 %, each side shown first equally often."""
    rng = np.random.default_rng(seed)
    strength = {"v1": 0.0, "v2": 0.6, "v3": 1.1, "base": -0.4}
    names = list(strength)
    out = []
    for _ in range(n):
        a, b = rng.choice(len(names), size=2, replace=False)
        ma, mb = names[a], names[b]
        p = 1 / (1 + math.exp(-(strength[ma] - strength[mb])))
        u = rng.random()
        out.append((ma, mb, "tie" if u < 0.15 else "model_a" if rng.random() < p else "model_b"))
    return out


def fastchat_mle_elo(battles, scale=400, base=10, init_rating=1000):
    """The notebook's ``compute_mle_elo`` (see the module doc), on plain lists."""
    from sklearn.linear_model import LogisticRegression

    models = list(dict.fromkeys(m for a, b, _ in battles for m in (a, b)))
    index = {m: i for i, m in enumerate(models)}
    doubled = battles + battles  # duplicate battles
    x = np.zeros((len(doubled), len(models)))
    y = np.zeros(len(doubled))
    for row, (a, b, winner) in enumerate(doubled):
        x[row, index[a]] = +math.log(base)
        x[row, index[b]] = -math.log(base)
        if winner == "model_a":
            y[row] = 1.0  # one A win => two A wins
        elif winner == "tie" and row < len(battles):
            y[row] = 1.0  # one tie => one A win + one B win
    # penalty=None in the notebook; scikit-learn >= 1.8 spells "no penalty" C=inf
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-12, max_iter=10_000)
    lr.fit(x, y)
    return dict(zip(models, scale * lr.coef_[0] + init_rating, strict=True))


def test_ratings_equal_fastchat_compute_mle_elo_on_a_fixed_battle_set():
    battles = fixed_battles()
    reference = fastchat_mle_elo(battles)
    ours = {m["model"]: m["rating"] for m in arena_ratings(battles, rounds=0)["models"]}
    assert set(ours) == set(reference)
    # the unanchored reference is centred at 1000 as well (its gradient keeps sum(coef) = 0)
    assert np.mean(list(reference.values())) == pytest.approx(1000, abs=1e-6)
    for model, rating in reference.items():
        assert ours[model] == pytest.approx(rating, abs=1e-6), model


def test_two_models_closed_form():
    # v2 scores 6.5 of 10 against v1: R_v2 - R_v1 = 400 log10(0.65 / 0.35)
    battles = [("v2", "v1", "model_a")] * 6 + [("v1", "v2", "model_a")] * 3 + [("v1", "v2", "tie")]
    rows = {m["model"]: m for m in arena_ratings(battles, rounds=0)["models"]}
    assert rows["v2"]["rating"] - rows["v1"]["rating"] == pytest.approx(
        400 * math.log10(0.65 / 0.35), abs=1e-6
    )
    assert (rows["v2"]["wins"], rows["v2"]["ties"], rows["v2"]["losses"]) == (6, 1, 3)


def test_bootstrap_interval_holds_the_estimate_and_is_reproducible():
    battles = fixed_battles(n=200)
    first = arena_ratings(battles, rounds=200, seed=3)
    again = arena_ratings(battles, rounds=200, seed=3)
    assert first == again
    assert first["bootstrap"]["used"] + first["bootstrap"]["not_identifiable"] == 200
    for m in first["models"]:
        low, high = m["ci"]
        assert low < m["rating"] < high
        assert (
            20 < high - low < 400
        )  # ~50 battles per model: tens of points, not nothing, not everything


def test_a_model_that_won_every_battle_has_no_finite_rating():
    battles = [("v2", "v1", "model_a")] * 5 + [("v1", "v2", "model_b")] * 4
    result = arena_ratings(battles, rounds=50)
    assert result["identifiable"] is False
    assert all(m["rating"] is None and m["ci"] is None for m in result["models"])
    models, matchups, outcomes, counts = encode(battles)
    with pytest.raises(NotIdentifiable, match="won or lost every battle"):
        bt_ratings(matchups, outcomes, counts, len(models))
    # one tie joins the two sides: finite again
    assert arena_ratings(battles + [("v1", "v2", "tie")], rounds=0)["identifiable"] is True


def test_pair_record_counts_and_wilson_intervals_match_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    battles = (
        [("v2", "v1", "model_a")] * 7 + [("v1", "v2", "model_a")] * 2 + [("v2", "v1", "tie")] * 3
    )
    (row,) = pair_record(battles)
    assert (row["model_1"], row["model_2"], row["battles"]) == ("v1", "v2", 12)
    assert (row["wins"]["count"], row["ties"]["count"], row["losses"]["count"]) == (2, 3, 7)
    for name in ("wins", "ties", "losses"):
        k = row[name]["count"]
        low, high = proportion_confint(k, 12, alpha=0.05, method="wilson")
        assert row[name]["ci"] == pytest.approx([low, high], abs=1e-12)
    assert row["score"] == pytest.approx((2 + 1.5) / 12)
