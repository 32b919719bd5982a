"""Majority vote with an explicit tie policy.

Posteriors are the vote shares of each unit; a rater's reliability is the share of their labels
that equal the majority label on units where the majority is decided (``tie="nan"`` leaves
tied units undecided and out of that share).

Tie policies: ``"random"`` (default; a seeded uniform choice among the tied classes, so no class
is favoured), ``"lowest"`` (the smallest class value: deterministic but biased) and ``"nan"``
(``None`` label: route the unit to adjudication instead).

>>> r = majority_vote(["u1", "u1", "u1", "u2", "u2"], ["a", "b", "c", "a", "b"], [1, 1, 0, 0, 1], tie="nan")
>>> r.labels.tolist()
[1, None]
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .base import AggregationResult, encode

TiePolicy = Literal["random", "lowest", "nan"]


def majority_vote(
    units: Any,
    raters: Any,
    labels: Any,
    tie: TiePolicy = "random",
    seed: int | None = 0,
    classes: Any = None,
) -> AggregationResult:
    enc = encode(units, raters, labels, classes)
    votes = enc.vote_counts()
    post = votes / votes.sum(axis=1, keepdims=True)
    top = votes == votes.max(axis=1, keepdims=True)
    tied = top.sum(axis=1) > 1
    if tie == "random":
        rng = np.random.default_rng(seed)
        noise = rng.random(votes.shape) * top
        winner = np.argmax(noise, axis=1)
    elif tie in ("lowest", "nan"):
        winner = np.argmax(top, axis=1)
    else:
        raise ValueError(f"tie must be 'random', 'lowest' or 'nan', got {tie!r}")
    labels_out = enc.classes[winner].astype(object)
    if tie == "nan":
        labels_out[tied] = None
    decided = ~tied if tie == "nan" else np.ones(len(tied), bool)
    hit = (winner[enc.u] == enc.c) & decided[enc.u]
    n_r = np.bincount(enc.r, weights=decided[enc.u].astype(float), minlength=len(enc.raters))
    with np.errstate(invalid="ignore"):
        reliability = np.bincount(enc.r, weights=hit.astype(float), minlength=len(enc.raters)) / n_r
    return AggregationResult(
        "majority_vote", enc.units, enc.classes, post, labels_out, enc.raters, reliability
    )
