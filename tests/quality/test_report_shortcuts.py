"""The streaming report's per-item shortcuts (``quality/accumulate.py``: pairwise label rows
without ``LabelRow``, the label set of plain pairwise items, an item's units grouped once) give
``build_report``'s report: items of two answers, each plain or with one twist that leaves the
shortcut (a revision, a model's label, an adjudication, a second guideline version, a missing
strength, a tie), in one or several batches."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from preflab.quality import accumulate
from preflab.quality.accumulate import ReportAccumulator
from preflab.schema import Item, JudgmentBase, PairwiseJudgment

from .test_report_streaming import assert_same, both

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TWISTS = ("plain", "revision", "ai", "adjudicated", "two_versions", "no_strength", "tie")


def pairwise_project(seed: int) -> tuple[list[JudgmentBase], dict[str, Item], dict[str, str]]:
    rng = random.Random(seed)
    raters = [f"r{k}" for k in range(6)]
    texts = ["short", "a longer answer of words", "Great question! yes", "- one\n- two", "x y z"]
    items: dict[str, Item] = {}
    batches: dict[str, str] = {}
    js: list[JudgmentBase] = []
    minute = 0
    for n in range(120):
        item_id, twist = f"p{n}", TWISTS[n % len(TWISTS)]
        items[item_id] = Item(
            id=item_id,
            prompt=f"prompt {n}",
            candidates=[{"id": c, "text": rng.choice(texts)} for c in ("a", "b")],
        )
        batches[item_id] = f"batch {n % 3}"
        version = rng.choice([None, 1])
        chosen = rng.sample(raters, rng.randint(1, 4))
        for k, rater in enumerate(chosen):
            minute += 1
            prov: dict[str, Any] = {
                "rater_id": rater,
                "submitted_at": T0 + timedelta(minutes=minute),
                "started_at": T0 + timedelta(minutes=minute, seconds=-rng.randint(5, 90)),
                "guideline_version": version,
            }
            winner = rng.choice(["a", "b"]) if twist != "tie" or k else "tie"
            strength: int | None = 0 if winner == "tie" else rng.randint(1, 3)
            if twist == "no_strength" and winner != "tie":
                strength = None
            if twist == "ai" and k == 0:
                prov["source"] = "ai"
            if twist == "adjudicated" and k == 0:
                prov["review_pass"] = 2
            if twist == "two_versions" and k == 0:
                prov["guideline_version"] = 2 if version != 2 else 1
            shown = ("a", "b") if rng.random() < 0.5 else ("b", "a")
            j = PairwiseJudgment(
                item_id=item_id,
                shown_order=shown,
                winner=winner,
                strength=strength,
                provenance=prov,
            )
            js.append(j)
            if twist == "revision" and k == 0:  # the same rater and pair again, later
                minute += 1
                js.append(
                    PairwiseJudgment(
                        item_id=item_id,
                        shown_order=shown[::-1],
                        winner="a",
                        strength=1,
                        provenance={**prov, "submitted_at": T0 + timedelta(minutes=minute)},
                    )
                )
    return js, items, batches


@pytest.mark.parametrize("include_ai", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_pairwise_items_with_and_without_twists(seed: int, include_ai: bool) -> None:
    js, items, batches = pairwise_project(seed)
    old, new = both(js, items, batches=batches, n_boot=30, include_ai=include_ai)
    assert_same(old, new)
    set_aside = old["label_set"]["set_aside"]
    assert set_aside.get("revised") and set_aside.get("adjudicated")
    assert ("source-ai" in set_aside) is not include_ai
    assert old["adjudication_total"] > 0 and len(old["agreement_by_guideline_version"]) > 1


def test_the_shortcuts_are_taken_and_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sides of each shortcut run on this project (the comparison above covers both)."""
    js, items, batches = pairwise_project(0)
    calls = {"resolve_labels": 0, "units": 0, "no_units": 0}
    resolve, item_units = accumulate.resolve_labels, accumulate._item_units

    def counting_resolve(*args: Any, **kw: Any) -> Any:
        calls["resolve_labels"] += 1
        return resolve(*args, **kw)

    def counting_units(cols: Any) -> Any:
        units = item_units(cols)
        calls["units" if units is not None else "no_units"] += 1
        return units

    monkeypatch.setattr(accumulate, "resolve_labels", counting_resolve)
    monkeypatch.setattr(accumulate, "_item_units", counting_units)
    acc = ReportAccumulator(batches=batches)
    by_item: dict[str, list[JudgmentBase]] = {}
    for j in js:
        by_item.setdefault(j.item_id, []).append(j)
    for item_id, item_js in by_item.items():
        acc.add(item_js, items[item_id])
    assert 0 < calls["resolve_labels"] < len(by_item)  # plain items skip it, twisted ones not
    assert calls["units"] > 0 and calls["no_units"] > 0
