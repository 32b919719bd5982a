"""Hold-out accuracy of an aggregation method when there is no gold: leave one rater out.

Each rater in turn is held out; the method aggregates everyone else's labels, and its label for
each unit the held-out rater labelled (and someone else did too) is compared with that rater's.
The held-out rater is an independent human reference, so a method that scores lower than
majority vote here agrees less with people than counting votes does. (Leave-one-annotator-out
evaluation of aggregation without gold is standard; e.g. Paun et al. 2018, TACL 6, section 5.)

A method returns an :class:`~.base.AggregationResult`; its ``posteriors`` decide: a unit whose
top posterior is shared by several classes scores ``1/n_tied`` when the held-out label is among
them (the *expected* accuracy of a random tie-break, so majority vote is not scored by one
seed's luck).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..table import as_array
from .base import AggregationResult

Method = Callable[[Any, Any, Any], AggregationResult]


def expected_hits(result: AggregationResult, units: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Expected 0..1 hit of each (unit, label) pair under a uniform tie-break of the top classes."""
    row = {u: i for i, u in enumerate(result.units.tolist())}
    col = {c: i for i, c in enumerate(result.classes.tolist())}
    post = result.posteriors
    top = np.isclose(post, post.max(axis=1, keepdims=True), rtol=0, atol=1e-12)
    hits = np.zeros(len(units))
    for n, (u, lab) in enumerate(zip(units.tolist(), labels.tolist(), strict=True)):
        i, j = row[u], col.get(lab)
        if j is not None and top[i, j]:
            hits[n] = 1.0 / top[i].sum()
    return hits


def leave_one_rater_out(units: Any, raters: Any, labels: Any, method: Method) -> dict[str, float]:
    """``{"accuracy", "n"}``: mean expected hit over every held-out label that can be scored."""
    lab = as_array(labels, "labels")
    u = as_array(units, "units", len(lab))
    r = as_array(raters, "raters", len(lab))
    hits: list[np.ndarray] = []
    for rater in np.unique(r):
        held = r == rater
        rest_units = set(u[~held].tolist())
        scored = held & np.isin(u, list(rest_units))
        if not scored.any():
            continue
        result = method(u[~held], r[~held], lab[~held])
        hits.append(expected_hits(result, u[scored], lab[scored]))
    all_hits = np.concatenate(hits) if hits else np.zeros(0)
    return {
        "accuracy": float(all_hits.mean()) if len(all_hits) else float("nan"),
        "n": int(len(all_hits)),
    }
