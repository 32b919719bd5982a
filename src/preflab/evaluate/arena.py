"""Statistics of battles between models: win/tie/loss with Wilson intervals, and Bradley–Terry
ratings on the Chatbot Arena scale with bootstrap intervals. Pure functions over lists and arrays.

A *battle* is one person's verdict on two models' answers to one prompt: ``model_a`` (the answer
shown first), ``model_b`` and ``winner`` in ``{"model_a", "model_b", "tie"}``.

Ratings (:func:`bt_ratings`) are the maximum-likelihood Bradley–Terry strengths on the Elo-like
scale of Chatbot Arena: ``P(a beats b) = 1 / (1 + base ** ((R_b - R_a) / scale))`` with base 10
and scale 400, a tie counted as half a win for each side, centred on a mean of 1000. This is the
estimate of FastChat's ``compute_mle_elo`` (Chatbot Arena's notebook, Dec 2023: logistic
regression without intercept on a design of ``+ln 10`` / ``-ln 10`` per battle, each battle
duplicated, a tie one win for each side) and of its successor ``compute_bt``
(``fastchat/serve/monitor/rating_systems.py``, which fits the same likelihood on the unique
``(model_a, model_b, outcome)`` rows weighted by their counts, as done here). FastChat shifts
its ratings so that one named model sits at a fixed value; here the mean is 1000 (what its
unanchored fit gives). Bootstrap intervals resample the battles with replacement (a multinomial
draw of the unique rows' counts, as ``compute_bootstrap_bt`` does) and take percentiles.

A maximum-likelihood rating exists only when the "beats or ties" graph of the models is strongly
connected: a model that won (or lost) every battle against the rest has an infinite rating. Then
:func:`bt_ratings` raises :class:`NotIdentifiable`; bootstrap samples in that state are left out
of the intervals and counted (``bootstrap.not_identifiable``).

>>> battles = [("v2", "v1", "model_a")] * 6 + [("v2", "v1", "model_b")] * 3 + [("v1", "v2", "tie")]
>>> r = arena_ratings(battles, rounds=0)
>>> [(m["model"], round(m["rating"], 1)) for m in r["models"]]
[('v2', 1053.8), ('v1', 946.2)]

With two models the maximum is closed-form: v2 scores 6.5 of 10, so ``R_v2 - R_v1 = 400 *
log10(0.65 / 0.35) = 107.5``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit, log_expit

from ..quality.gold import wilson_interval

OUTCOMES = {"model_a": 1.0, "tie": 0.5, "model_b": 0.0}
BASE, SCALE, INIT_RATING = 10.0, 400.0, 1000.0

Battle = tuple[str, str, str]  # (model_a, model_b, winner)


class NotIdentifiable(ValueError):
    """The battles give no finite maximum-likelihood rating (see the module doc)."""


def encode(battles: Iterable[Battle]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``(models, matchups (k, 2), outcomes (k,), counts (k,))`` over the unique battle rows.

    Models are in order of first appearance; outcomes are 1 (``model_a`` won), 0.5 (tie), 0.
    """
    index: dict[str, int] = {}
    rows: dict[tuple[int, int, float], int] = {}
    for model_a, model_b, winner in battles:
        if winner not in OUTCOMES:
            raise ValueError(f"battle winner {winner!r}: expected one of {', '.join(OUTCOMES)}")
        if model_a == model_b:
            raise ValueError(f"battle of {model_a!r} against itself")
        a = index.setdefault(model_a, len(index))
        b = index.setdefault(model_b, len(index))
        key = (a, b, OUTCOMES[winner])
        rows[key] = rows.get(key, 0) + 1
    keys = list(rows)
    matchups = np.array([(a, b) for a, b, _ in keys], dtype=np.int64).reshape(-1, 2)
    outcomes = np.array([o for _, _, o in keys], dtype=np.float64)
    counts = np.array([rows[k] for k in keys], dtype=np.float64)
    return list(index), matchups, outcomes, counts


def identifiable(
    matchups: np.ndarray, outcomes: np.ndarray, weights: np.ndarray, n_models: int
) -> bool:
    """Whether the models' "beats or ties" graph (rows with weight > 0) is strongly connected."""
    live = weights > 0
    m, o = matchups[live], outcomes[live]
    # an edge winner -> loser for each side that scored in a row (a tie scores for both)
    src = np.concatenate([m[o > 0, 0], m[o < 1, 1]])
    dst = np.concatenate([m[o > 0, 1], m[o < 1, 0]])
    graph = csr_matrix((np.ones(len(src)), (src, dst)), shape=(n_models, n_models))
    n_components, _ = connected_components(graph, directed=True, connection="strong")
    return n_components == 1


def _loss(
    ratings: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    outcomes: np.ndarray,
    weights: np.ndarray,
    alpha: float,
) -> float:
    diff = alpha * (ratings[a] - ratings[b])
    return float(
        -np.sum(weights * (outcomes * log_expit(diff) + (1 - outcomes) * log_expit(-diff)))
    )


def _newton(
    a: np.ndarray,
    b: np.ndarray,
    outcomes: np.ndarray,
    weights: np.ndarray,
    n: int,
    alpha: float,
    max_iter: int = 100,
) -> np.ndarray:
    """Maximise the (concave) log-likelihood by damped Newton steps on the ratings summing to 0.

    The Hessian is singular along the all-ones direction (only differences matter), and the
    gradient is orthogonal to it: solving with ``H + 1 1^T`` gives the Newton step that keeps the
    sum at 0. A handful of steps reach machine precision (L-BFGS needed hundreds per bootstrap
    sample for the same precision).
    """
    ratings = np.zeros(n)
    ones = np.ones((n, n))
    loss = _loss(ratings, a, b, outcomes, weights, alpha)
    for _ in range(max_iter):
        p = expit(alpha * (ratings[a] - ratings[b]))
        per_row = alpha * weights * (outcomes - p)  # d loglik / d r_a (and minus that for r_b)
        grad = np.bincount(a, per_row, n) - np.bincount(b, per_row, n)
        h = alpha * alpha * weights * p * (1 - p)
        hess = np.zeros((n, n))
        np.add.at(hess, (a, a), h)
        np.add.at(hess, (b, b), h)
        np.add.at(hess, (a, b), -h)
        np.add.at(hess, (b, a), -h)
        step = np.linalg.solve(hess + ones, grad)
        t = 1.0
        while t > 1e-8:  # backtrack until the likelihood does not fall
            candidate = ratings + t * step
            new_loss = _loss(candidate, a, b, outcomes, weights, alpha)
            if new_loss <= loss + 1e-15:
                break
            t /= 2
        ratings, loss = candidate, new_loss
        if np.max(np.abs(t * step)) < 1e-13:
            break
    return ratings - ratings.mean()


def bt_ratings(
    matchups: np.ndarray,
    outcomes: np.ndarray,
    weights: np.ndarray,
    n_models: int,
    *,
    base: float = BASE,
    scale: float = SCALE,
    init_rating: float = INIT_RATING,
) -> np.ndarray:
    """Maximum-likelihood Bradley–Terry ratings (Arena scale, mean ``init_rating``) of weighted
    battle rows; :class:`NotIdentifiable` when no finite maximum exists."""
    if n_models < 2 or not identifiable(matchups, outcomes, weights, n_models):
        raise NotIdentifiable(
            "a model won or lost every battle against the others (or fewer than two models): "
            "no finite rating; collect more battles"
        )
    # Natural-scale ratings r with P(a beats b) = expit(ln(base) * (r_a - r_b)); Elo = scale * r.
    # Normalised weights: the loss is an average, so the stopping rule does not depend on n.
    live = weights > 0
    ratings = _newton(
        matchups[live, 0],
        matchups[live, 1],
        outcomes[live],
        weights[live] / weights.sum(),
        n_models,
        math.log(base),
    )
    return scale * ratings + init_rating


def arena_ratings(
    battles: Sequence[Battle],
    *,
    rounds: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Ratings of every model in ``battles`` with percentile bootstrap intervals (see module doc).

    Returns ``{"models": [{"model", "rating", "ci", "battles", "wins", "ties", "losses"}, ...]``
    (best first; ``rating`` and ``ci`` are ``None`` when not identifiable), ``"identifiable"``,
    ``"bootstrap": {"rounds", "used", "not_identifiable", "seed", "confidence"}``.
    """
    models, matchups, outcomes, counts = encode(battles)
    n = len(models)
    record = {m: {"battles": 0, "wins": 0, "ties": 0, "losses": 0} for m in models}
    for (a, b), o, c in zip(matchups, outcomes, counts, strict=True):
        for side, score in ((a, o), (b, 1 - o)):
            r = record[models[side]]
            r["battles"] += int(c)
            r["wins" if score == 1 else "ties" if score == 0.5 else "losses"] += int(c)
    try:
        ratings: np.ndarray | None = bt_ratings(matchups, outcomes, counts, n)
    except NotIdentifiable:
        ratings = None
    boot = (
        _bootstrap(matchups, outcomes, counts, n, rounds, seed)
        if ratings is not None and rounds > 0
        else None
    )
    tail = (1 - confidence) / 2
    rows: list[dict[str, Any]] = []
    for i, m in enumerate(models):
        ci = None
        if boot is not None and len(boot):
            ci = [float(np.quantile(boot[:, i], tail)), float(np.quantile(boot[:, i], 1 - tail))]
        rows.append(
            {
                "model": m,
                "rating": None if ratings is None else float(ratings[i]),
                "ci": ci,
                **record[m],
            }
        )
    rows.sort(key=lambda r: (-(r["rating"] if r["rating"] is not None else -math.inf), r["model"]))
    return {
        "models": rows,
        "identifiable": ratings is not None,
        "scale": {"base": BASE, "scale": SCALE, "mean": INIT_RATING},
        "bootstrap": {
            "rounds": rounds,
            "used": 0 if boot is None else len(boot),
            "not_identifiable": 0 if boot is None else rounds - len(boot),
            "seed": seed,
            "confidence": confidence,
        },
    }


def _bootstrap(
    matchups: np.ndarray,
    outcomes: np.ndarray,
    counts: np.ndarray,
    n_models: int,
    rounds: int,
    seed: int,
) -> np.ndarray:
    """Ratings of ``rounds`` resamples of the battles; resamples without finite ratings left out."""
    rng = np.random.default_rng(seed)
    total = int(counts.sum())
    draws = rng.multinomial(total, counts / total, size=rounds).astype(np.float64)
    out = []
    for weights in draws:
        try:
            out.append(bt_ratings(matchups, outcomes, weights, n_models))
        except NotIdentifiable:
            continue
    return np.array(out).reshape(-1, n_models)


def pair_record(battles: Iterable[Battle]) -> list[dict[str, Any]]:
    """Per unordered model pair: battles, wins / ties / losses of the first model (the models of a
    pair in name order) as counts and shares with 95 % Wilson intervals."""
    table: dict[tuple[str, str], list[int]] = {}
    for model_a, model_b, winner in battles:
        first, second = sorted((model_a, model_b))
        outcome = OUTCOMES[winner] if first == model_a else 1 - OUTCOMES[winner]
        row = table.setdefault((first, second), [0, 0, 0])
        row[0 if outcome == 1 else 1 if outcome == 0.5 else 2] += 1
    out = []
    for (first, second), (wins, ties, losses) in sorted(table.items()):
        n = wins + ties + losses
        share = {
            name: {"count": k, "share": k / n, "ci": list(wilson_interval(k, n))}
            for name, k in (("wins", wins), ("ties", ties), ("losses", losses))
        }
        out.append(
            {
                "model_1": first,
                "model_2": second,
                "battles": n,
                **share,
                "score": (wins + ties / 2) / n,
            }
        )
    return out
