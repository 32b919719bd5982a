"""Issue 27 §2 (branch ``snapmem``): the snapshot's memory cuts draw the same panels.

* The length chart (:func:`plots.length_bias_curve`) binned over distinct (chosen, rejected)
  pairs with their counts, from lists or int64 columns, equals the chart of every pair as a
  tuple a side (the code it replaced, kept here as the reference).
* ``_report_panels`` (the accumulator dropped before the panels, the lengths as columns) equals
  ``quality_panels(finish_report(acc), *acc.length_pairs())``.
* The raters' median times in the snapshot share one budget (``Bounds.times``): exact below it,
  a sample's past it and said so (``median_s_sample``).
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from typing import Any

import numpy as np
import pytest

from preflab.io.quality_source import accumulate_in
from preflab.quality.accumulate import Bounds
from preflab.quality.report import finish_report
from preflab.server import snapshot
from preflab.server.database import Database
from preflab.server.pages import plots
from preflab.server.pages.panels import quality_panels

from . import snapshot_oracle
from .test_browse_snapshot import _project, _ref


def _curve_reference(
    chosen: list[int], rejected: list[int], logistic: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``length_bias_curve`` before this branch (main at 0234abc): a tuple per side."""
    xs: list[tuple[float, int]] = []
    for c, r in zip(chosen, rejected, strict=True):
        if c > 0 and r > 0 and c != r:
            x = math.log2(c / r)
            xs += [(x, 1), (-x, 0)]
    if not xs:
        return None
    edges = [-3 + 0.5 * k for k in range(13)]
    frame = plots._frame(-3, 3, 0, 1, [-3, -2, -1, 0, 1, 2, 3], [0, 0.5, 1])
    sx, sy = frame.pop("sx"), frame.pop("sy")
    frame["xticks"] = [
        {**t, "label": f"×{2**v:g}"} for t, v in zip(frame["xticks"], range(-3, 4), strict=True)
    ]
    dots = []
    for a, b in zip(edges, edges[1:], strict=False):
        inside = [y for x, y in xs if a <= max(-3, min(x, 2.999)) < b]
        if inside:
            share = sum(inside) / len(inside)
            dots.append(
                {
                    "x": sx((a + b) / 2),
                    "y": sy(share),
                    "value": share,
                    "n": len(inside),
                    "label": f"×{2**a:.2g}–{2**b:.2g}",
                }
            )
    fit = None
    if logistic and plots._ok(logistic.get("slope")):
        slope = logistic["slope"]
        pts = [
            (x / 10, 1 / (1 + math.exp(-slope * (x / 10) * math.log(2)))) for x in range(-30, 31)
        ]
        fit = " ".join(f"{sx(x)},{sy(p)}" for x, p in pts)
    return {**frame, "dots": dots, "fit": fit, "half": sy(0.5)}


def _pairs(n: int, seed: int) -> tuple[list[int], list[int]]:
    """Word lengths with every twist of the chart: equal lengths, zeros, ratios on the bins'
    edges (powers of two, past x8 both ways), wide spread, many repeats."""
    rng = random.Random(seed)
    chosen, rejected = [], []
    for _ in range(n):
        roll = rng.random()
        r = rng.randrange(1, 400)
        if roll < 0.1:
            c = r  # equal: not in the chart
        elif roll < 0.15:
            c, r = rng.choice([(0, r), (r, 0), (0, 0)])  # a zero length: not in the chart
        elif roll < 0.35:
            c = r * 2 ** rng.randrange(1, 5)  # x2 .. x16: on an edge or clamped
            if rng.random() < 0.5:
                c, r = r, c
        else:
            c = rng.randrange(1, 2000)
        chosen.append(c)
        rejected.append(r)
    return chosen, rejected


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_length_curve_equals_the_reference(seed):
    chosen, rejected = _pairs(5000, seed)
    logistic = {"slope": 0.37}
    expected = _curve_reference(chosen, rejected, logistic)
    assert expected is not None and len(expected["dots"]) == 12  # every bin, edges included
    assert plots.length_bias_curve(chosen, rejected, logistic) == expected
    cols = np.asarray(chosen, dtype=np.int64), np.asarray(rejected, dtype=np.int64)
    assert plots.length_bias_curve(*cols, logistic) == expected
    # a few pairs (most bins empty), and no fit
    assert plots.length_bias_curve(chosen[:7], rejected[:7], None) == _curve_reference(
        chosen[:7], rejected[:7], None
    )


def test_the_length_curve_without_pairs_it_can_draw():
    assert plots.length_bias_curve([], [], None) is None
    assert plots.length_bias_curve(np.zeros(0, np.int64), np.zeros(0, np.int64), None) is None
    assert plots.length_bias_curve([3, 0, 5], [3, 4, 0], None) is None  # equal or zero only
    with pytest.raises(ValueError):
        plots.length_bias_curve([1, 2], [3], None)


def test_report_panels_equal_the_lists_path(db_url):
    """The snapshot's panels from the accumulator it consumes equal the panels of the report
    and the accumulator's length lists (the code before this branch)."""
    _project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.reading() as s:
        _, searched = snapshot.activity(s, project)
        acc = accumulate_in(s, project.name)
        acc.pair_search = searched.pairs
        chosen, rejected = acc.length_pairs()
        assert len(chosen) > 10 and any(c != r for c, r in zip(chosen, rejected, strict=True))
        expected = quality_panels(finish_report(acc), chosen, rejected)
        assert expected["length"]["curve"]["dots"]
        got = snapshot._report_panels(accumulate_in(s, project.name), searched)
    assert snapshot.jsonable(got) == snapshot.jsonable(expected)
    db.dispose()


def _times_per_rater(db: Database, project: Any) -> dict[str, list[float]]:
    """Every production label's seconds per rater, as the per-rater pass reads them."""
    out: dict[str, list[float]] = {}
    with db.reading() as s:
        for _pk, review_pass, started, submitted, _t, _r, key in snapshot._activity_rows(
            s, project.pk
        ):
            if review_pass == 0 and started is not None and submitted is not None:
                out.setdefault(key, []).append((submitted - started).total_seconds())
    return out


def test_rater_medians_exact_below_the_budget_sampled_above(db_url, monkeypatch):
    _project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    times = _times_per_rater(db, project)
    total = sum(len(v) for v in times.values())
    assert len(times) >= 4 and total > 20
    with db.reading() as s:
        reference = snapshot_oracle.rater_activity(s, project)
    # a budget of exactly every time: exact, nothing said
    monkeypatch.setattr(snapshot, "Bounds", lambda: Bounds(times=total))
    with db.reading() as s:
        exact = snapshot.rater_activity(s, project)
    assert exact == reference and "median_s_sample" not in exact
    # a budget smaller than the times: the raters share it, the sampled ones are named
    budget = total // 2
    monkeypatch.setattr(snapshot, "Bounds", lambda: Bounds(times=budget))
    with db.reading() as s:
        sampled = snapshot.rater_activity(s, project)
    notes = sampled["median_s_sample"]
    assert notes and set(sampled["median_s"]) == set(reference["median_s"])
    assert sum(n["labels"] for n in notes.values()) + sum(
        len(times[k]) for k in times if k not in notes
    ) <= max(budget, len(times))
    for key, values in times.items():
        if key in notes:
            assert notes[key]["of"] == len(values) > notes[key]["labels"]
            kept = notes[key]["labels"]
            assert min(values) <= sampled["median_s"][key] <= max(values)
            assert kept == max(n["labels"] for n in notes.values())  # one common bound
        else:
            assert sampled["median_s"][key] == statistics.median(values)
    assert {k: v for k, v in sampled.items() if k not in ("median_s", "median_s_sample")} == {
        k: v for k, v in reference.items() if k != "median_s"
    }
    db.dispose()


def test_a_sampled_median_is_a_median_of_the_raters_own_times(db_url, monkeypatch):
    """Past the budget a rater's median is the median of a subset of their own times."""
    _project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    times = _times_per_rater(db, project)
    monkeypatch.setattr(snapshot, "Bounds", lambda: Bounds(times=len(times)))  # one each
    with db.reading() as s:
        sampled = snapshot.rater_activity(s, project)
    for key, values in times.items():
        assert sampled["median_s"][key] in Counter(values)
        if len(values) > 1:
            assert sampled["median_s_sample"][key] == {"labels": 1, "of": len(values)}
    db.dispose()
