"""The raters' active times under one budget (:class:`SharedReservoirs`, ``Bounds.times``):
exact below it, bounded by it above however many raters and labels, each rater's kept times a
seeded sample of their own, said so in the report."""

from __future__ import annotations

import random
import statistics
from collections import Counter

from preflab.quality.accumulate import Bounds, SharedReservoirs
from preflab.quality.report import build_report, report_from_items

from .test_report_streaming import by_item, generated_project


def _feed(res: SharedReservoirs, sizes: dict[str, int], seed: int = 0) -> dict[str, list[float]]:
    """Add ``sizes[key]`` values per key, interleaved at random; the values added per key."""
    rng = random.Random(seed)
    order = [k for k, n in sizes.items() for _ in range(n)]
    rng.shuffle(order)
    added: dict[str, list[float]] = {k: [] for k in sizes}
    for k in order:
        v = rng.random() * 100
        added[k].append(v)
        res.add(k, v)
    return added


def test_below_the_budget_every_value_is_kept_in_order():
    res = SharedReservoirs(total=1000, per_key=1000)
    added = _feed(res, {"a": 400, "b": 350, "c": 250})  # exactly the budget
    for k, values in added.items():
        assert list(res.by_key[k].items) == values
        assert not res.by_key[k].sampled
    assert res.kept == 1000


def test_above_the_budget_the_raters_share_it():
    total = 600
    res = SharedReservoirs(total=total, per_key=10_000)
    sizes = {f"r{i}": n for i, n in enumerate([5, 20, 100, 900, 3000, 3000])}
    added = _feed(res, sizes, seed=1)
    kept = {k: list(r.items) for k, r in res.by_key.items()}
    assert sum(map(len, kept.values())) == res.kept <= total
    bound = res.bound
    for k, values in added.items():
        r = res.by_key[k]
        assert r.seen == len(values)
        assert len(kept[k]) == min(len(values), bound)
        assert not Counter(kept[k]) - Counter(values)  # a subset of the rater's own values
        assert r.sampled == (len(values) > bound)
    assert kept["r0"] == added["r0"] and kept["r1"] == added["r1"]  # few: all kept
    # the big raters' samples are spread over their values (a uniform sample)
    for k in ("r4", "r5"):
        assert abs(statistics.median(kept[k]) - 50) < 12
    # seeded: the same feed keeps the same values
    again = SharedReservoirs(total=total, per_key=10_000)
    _feed(again, sizes, seed=1)
    assert {k: list(r.items) for k, r in again.by_key.items()} == kept


def test_the_budget_does_not_grow_with_raters_or_labels():
    for n_raters, per in ((10, 500), (200, 50), (50, 2000)):
        res = SharedReservoirs(total=300, per_key=250_000)
        _feed(res, {f"r{i}": per for i in range(n_raters)}, seed=n_raters)
        assert res.kept == sum(len(r.items) for r in res.by_key.values())
        assert res.kept <= max(300, n_raters)  # one value a rater at the least
        assert all(len(r.items) >= 1 for r in res.by_key.values())


def test_the_per_rater_bound_still_holds():
    res = SharedReservoirs(total=10_000, per_key=30)
    added = _feed(res, {"a": 100, "b": 10})
    assert len(res.by_key["a"].items) == 30 and res.by_key["a"].seen == 100
    assert list(res.by_key["b"].items) == added["b"]


def test_the_report_says_which_medians_are_sampled():
    js, items = generated_project(seed=11)
    old = build_report([j for g, _ in by_item(js, items) for j in g], items=items, n_boot=20)
    timed = [r for r in old["raters"].values() if "median_seconds" in r]
    assert len(timed) >= 3
    # a budget of every time: the reference's medians, nothing said
    exact = report_from_items(by_item(js, items), n_boot=20, bounds=Bounds(times=len(js)))
    for r, row in old["raters"].items():
        assert exact["raters"][r].get("median_seconds") == row.get("median_seconds")
        assert "median_seconds_sample" not in exact["raters"][r]
    # a budget of a handful: sampled and said so, the other figures unchanged
    small = report_from_items(by_item(js, items), n_boot=20, bounds=Bounds(times=8))
    notes = [
        r["median_seconds_sample"] for r in small["raters"].values() if "median_seconds_sample" in r
    ]
    assert notes and sum(n["labels"] for n in notes) <= max(8, len(timed))
    assert small["agreement"] == exact["agreement"]
