"""``preflab rm eval``: how good is the reward model on held-out pairs, and is it just length?

Everything here takes arrays (rewards, lengths, labels), so the CLI, the benchmark and the tests
share one implementation. Baselines are fitted and scored in the same run on the same split:

- **longer-wins / shorter-wins**: the answer with more / fewer tokens wins (equal: half a point);
- **TF-IDF + logistic regression**: a linear Bradley–Terry model on bag-of-n-gram features,
  ``P(a ≻ b) = σ(w · (x_a − x_b))``, fitted on the training pairs in both orientations.

Accuracy CIs are Wilson score intervals (:func:`preflab.quality.gold.wilson_interval`). The
reward model against each baseline is a *paired* comparison on the same pairs: the pairs one
gets right and the other wrong, and the exact McNemar test of whether those split evenly
(McNemar 1947; the two-sided binomial test on the discordant pairs, as statsmodels'
``mcnemar(exact=True)``). Two accuracies whose CIs overlap can still differ significantly here,
and the reverse: a lead of a few pairs is no lead when p is large.
Calibration is top-label calibration of ``σ(r_a − r_b)`` (Guo et al. 2017, "On Calibration of
Modern Neural Networks", §2): confidence ``max(p, 1 − p)`` against being right, in 10 equal-width
bins over [0.5, 1]; ECE = Σ_b (n_b / N) · |accuracy_b − confidence_b|.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from ..quality.gold import wilson_interval
from .data import Pair

CALIBRATION_BINS = 10


def accuracy(points: np.ndarray) -> dict[str, Any]:
    """Mean of per-pair points (1 right, 0 wrong, 0.5 tie) with a 95 % Wilson interval."""
    n = int(len(points))
    if n == 0:
        return {"accuracy": None, "low": None, "high": None, "n": 0}
    wins = float(points.sum())
    low, high = wilson_interval(int(round(wins)), n)
    return {"accuracy": wins / n, "low": low, "high": high, "n": n}


def points_from_margin(delta: np.ndarray) -> np.ndarray:
    """1 where chosen scored higher, 0 where lower, 0.5 on a tie."""
    return np.where(delta > 0, 1.0, np.where(delta < 0, 0.0, 0.5))


def length_stratum(chosen_len: np.ndarray, rejected_len: np.ndarray) -> np.ndarray:
    return np.where(
        chosen_len > rejected_len,
        "chosen longer",
        np.where(chosen_len < rejected_len, "chosen shorter", "equal length"),
    )


def agreement_level(pair: Pair) -> str:
    if pair.n_raters is None or pair.agreement is None:
        return "unknown"
    if pair.n_raters == 1:
        return "single rater"
    return "unanimous" if pair.agreement >= 1 - 1e-9 else "split"


def stratified(points: np.ndarray, groups: Sequence[str]) -> dict[str, dict[str, Any]]:
    index: dict[str, list[int]] = defaultdict(list)
    for k, g in enumerate(groups):
        index[str(g)].append(k)
    return {g: accuracy(points[idx]) for g, idx in sorted(index.items())}


def calibration(delta: np.ndarray, bins: int = CALIBRATION_BINS) -> dict[str, Any]:
    """Reliability bins and ECE of ``σ(delta)`` as the probability that chosen wins."""
    p = 1 / (1 + np.exp(-delta))
    confidence = np.maximum(p, 1 - p)
    right = (p > 0.5).astype(float) + 0.5 * (p == 0.5)
    edges = np.linspace(0.5, 1.0, bins + 1)
    which = np.clip(np.digitize(confidence, edges[1:-1]), 0, bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        mask = which == b
        n = int(mask.sum())
        conf: float | None = None
        acc: float | None = None
        if n:
            conf, acc = float(confidence[mask].mean()), float(right[mask].mean())
            ece += n / len(delta) * abs(acc - conf)
        rows.append(
            {
                "low": float(edges[b]),
                "high": float(edges[b + 1]),
                "n": n,
                "confidence": conf,
                "accuracy": acc,
            }
        )
    return {"bins": rows, "ece": ece if len(delta) else None}


def tfidf_lr_deltas(train: Sequence[Pair], heldout: Sequence[Pair], seed: int = 0) -> np.ndarray:
    """Log-odds ``w · (x_chosen − x_rejected)`` of a TF-IDF + logistic-regression pair model."""
    from scipy.sparse import vstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    vectorizer.fit([t for p in train for t in (p.chosen, p.rejected)])
    diff = vectorizer.transform([p.chosen for p in train]) - vectorizer.transform(
        [p.rejected for p in train]
    )
    x = vstack([diff, -diff])
    y = np.r_[np.ones(len(train)), np.zeros(len(train))]
    model = LogisticRegression(C=1.0, fit_intercept=False, max_iter=2000, random_state=seed).fit(
        x, y
    )
    held = vectorizer.transform([p.chosen for p in heldout]) - vectorizer.transform(
        [p.rejected for p in heldout]
    )
    return model.decision_function(held)


def paired(points_a: np.ndarray, points_b: np.ndarray) -> dict[str, Any]:
    """Method a against method b on the same pairs (points 1 / 0.5 / 0 each).

    ``a_only``: pairs a gets right and b wrong; ``b_only`` the reverse (a tie against a right
    or wrong answer is half a pair either way, so the counts may end in .5); ``difference`` =
    accuracy(a) − accuracy(b); ``p_value``: exact two-sided McNemar test on the discordant pairs
    (counts rounded down to whole pairs).
    """
    pa, pb = np.asarray(points_a, float), np.asarray(points_b, float)
    gain = pa - pb
    a_only, b_only = float(gain[gain > 0].sum()), float(-gain[gain < 0].sum())
    return {
        "a_only": a_only,
        "b_only": b_only,
        # whole pairs, for people: a right and b wrong, the reverse, a tie on one side only
        "a_right_b_wrong": int(((pa == 1) & (pb == 0)).sum()),
        "b_right_a_wrong": int(((pb == 1) & (pa == 0)).sum()),
        "one_side_tied": int(((pa == 0.5) != (pb == 0.5)).sum()),
        "difference": float(gain.mean()) if len(gain) else None,
        "p_value": mcnemar_exact(a_only, b_only),
    }


def mcnemar_exact(a_only: float, b_only: float) -> float:
    """Two-sided exact McNemar p: the binomial test of ``a_only`` of the discordant pairs
    (each count rounded down to whole pairs; 1 when there are none)."""
    from scipy.stats import binomtest

    k, n = int(a_only), int(a_only) + int(b_only)
    return float(binomtest(k, n, 0.5).pvalue) if n else 1.0


def method_summary(delta: np.ndarray, strata: dict[str, Sequence[str]]) -> dict[str, Any]:
    points = points_from_margin(delta)
    return {
        **accuracy(points),
        "strata": {name: stratified(points, groups) for name, groups in strata.items()},
    }


def evaluate_pairs(
    heldout: Sequence[Pair],
    train: Sequence[Pair],
    *,
    reward_chosen: Sequence[float],
    reward_rejected: Sequence[float],
    length: Callable[[str], int],
    seed: int = 0,
) -> dict[str, Any]:
    """The full ``rm eval`` report over held-out pairs (rewards already computed)."""
    if not heldout:
        raise ValueError("no held-out pairs to evaluate")
    rc, rr = np.asarray(reward_chosen, float), np.asarray(reward_rejected, float)
    lc = np.array([length(p.chosen) for p in heldout], float)
    lr = np.array([length(p.rejected) for p in heldout], float)
    strata: dict[str, Sequence[str]] = {
        "length": list(length_stratum(lc, lr)),
        "domain": [p.domain or "none" for p in heldout],
        "agreement": [agreement_level(p) for p in heldout],
    }
    methods = {
        "reward_model": method_summary(rc - rr, strata),
        "longer_wins": method_summary(lc - lr, strata),
        "shorter_wins": method_summary(lr - lc, strata),
    }
    lr_delta = tfidf_lr_deltas(train, heldout, seed) if train else None
    if lr_delta is not None:
        methods["tfidf_lr"] = method_summary(lr_delta, strata)
    rewards, lengths = np.r_[rc, rr], np.r_[lc, lr]
    rho = spearmanr(rewards, lengths) if np.ptp(lengths) > 0 and np.ptp(rewards) > 0 else None
    report: dict[str, Any] = {
        "n_heldout": len(heldout),
        "n_train": len(train),
        "length_unit": "tokens",
        "methods": methods,
        "length_gap": {name: _length_gap(m) for name, m in methods.items()},
        "spearman_reward_length": {"rho": float(rho.statistic), "p_value": float(rho.pvalue)}
        if rho is not None
        else None,
        "calibration": {"reward_model": calibration(rc - rr)},
    }
    if lr_delta is not None:
        report["calibration"]["tfidf_lr"] = calibration(lr_delta)
    rm_points = points_from_margin(rc - rr)
    baselines = {"longer_wins": lc - lr, "shorter_wins": lr - lc}
    if lr_delta is not None:
        baselines["tfidf_lr"] = lr_delta
    report["versus"] = {
        name: paired(rm_points, points_from_margin(delta)) for name, delta in baselines.items()
    }
    return report


def _length_gap(method: dict[str, Any]) -> float | None:
    """|accuracy when chosen is longer − when shorter|: the length bias the issue asks to shrink."""
    strata = method["strata"]["length"]
    a, b = (
        strata.get("chosen longer", {}).get("accuracy"),
        strata.get("chosen shorter", {}).get("accuracy"),
    )
    return None if a is None or b is None else abs(a - b)


def finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)
