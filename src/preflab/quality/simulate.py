"""Seeded synthetic raters for tests, demos and planning.

A :class:`RaterProfile` says how a simulated rater behaves on pairwise comparisons: with
probability ``accuracy`` they pick the truly better answer; otherwise they guess, and their guess
leans to the first-shown answer (``position_bias``, extra probability over 1/2) or the longer
one (``length_bias``). A ``spam`` rater always guesses. ``drift_after`` / ``drift_accuracy``
drop the accuracy mid-stream; ``paste_rate`` makes rationales pasted; ``ms_per_word`` sets the
reading speed (telemetry ``active_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from preflab.schema import Item, PairwiseJudgment

from .agreement.krippendorff import krippendorff_alpha


@dataclass
class RaterProfile:
    accuracy: float = 0.85
    position_bias: float = 0.0
    length_bias: float = 0.0
    spam: bool = False
    drift_after: int | None = None
    drift_accuracy: float | None = None
    paste_rate: float = 0.0
    ms_per_word: float = 250.0


def simulate_pairwise(
    raters: dict[str, RaterProfile], n_items: int = 200, raters_per_item: int = 3, seed: int = 0
) -> tuple[list[Item], list[PairwiseJudgment], dict[str, str]]:
    """Items with two candidates of random length, judgments, and the true better candidate."""
    rng = np.random.default_rng(seed)
    names = sorted(raters)
    done = {r: 0 for r in names}
    items: list[Item] = []
    judgments: list[PairwiseJudgment] = []
    truth: dict[str, str] = {}
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(n_items):
        lengths = rng.integers(20, 400, 2)
        cands = [
            {"id": c, "text": " ".join(["word"] * int(n))} for c, n in zip(("x", "y"), lengths)
        ]
        item_id = f"item{i}"
        item = Item(id=item_id, prompt=f"prompt {i}", candidates=cands)
        items.append(item)
        better = "x" if rng.random() < 0.5 else "y"
        truth[item_id] = better
        longer = "x" if lengths[0] >= lengths[1] else "y"
        for name in rng.choice(names, size=min(raters_per_item, len(names)), replace=False):
            p = raters[name]
            shown = ("x", "y") if rng.random() < 0.5 else ("y", "x")
            acc = p.accuracy
            if (
                p.drift_after is not None
                and done[name] >= p.drift_after
                and p.drift_accuracy is not None
            ):
                acc = p.drift_accuracy
            if not p.spam and rng.random() < acc:
                chosen = better
            else:
                lean_first = 0.5 + p.position_bias
                lean_long = 0.5 + p.length_bias
                pick_first = rng.random() < lean_first
                chosen = shown[0] if pick_first else shown[1]
                if p.length_bias and rng.random() < 2 * abs(p.length_bias):
                    chosen = longer if rng.random() < lean_long else ({"x", "y"} - {longer}).pop()
            words = int(lengths.sum())
            paste = rng.random() < p.paste_rate
            rationale = f"I prefer {chosen} because it answers prompt {i} better"
            tele = {
                "active_ms": int(words * p.ms_per_word * rng.uniform(0.7, 1.3)),
                "typed_chars": 0 if paste else len(rationale),
                "pasted_chars": len(rationale) if paste else 0,
                "paste_count": 1 if paste else 0,
                "iki_cv": float(rng.uniform(0.4, 1.2)),
            }
            started = t0 + timedelta(minutes=10 * done[name])
            j = PairwiseJudgment(
                item_id=item.id,
                shown_order=shown,
                winner="a" if chosen == shown[0] else "b",
                strength=int(rng.integers(1, 4)),
                rationale=rationale,
                provenance={
                    "rater_id": str(name),
                    "telemetry": tele,
                    "started_at": started,
                    "submitted_at": started + timedelta(milliseconds=tele["active_ms"]),
                },
            )
            judgments.append(j)
            done[name] += 1
    return items, judgments, truth


def simulate_class_labels(
    accuracies: dict[str, float] | list[float],
    n_units: int = 1000,
    n_classes: int = 3,
    raters_per_unit: int = 3,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(units, raters, labels, truth)``: one-coin raters with the given accuracies."""
    rng = np.random.default_rng(seed)
    acc = (
        accuracies
        if isinstance(accuracies, dict)
        else {f"r{i}": a for i, a in enumerate(accuracies)}
    )
    names = np.array(sorted(acc))
    accv = np.array([acc[n] for n in names])
    truth = rng.integers(0, n_classes, n_units)
    units = np.repeat(np.arange(n_units), raters_per_unit)
    picks = np.argsort(rng.random((n_units, len(names))), axis=1)[:, :raters_per_unit].ravel()
    ok = rng.random(len(units)) < accv[picks]
    wrong = (truth[units] + rng.integers(1, n_classes, len(units))) % n_classes
    labels = np.where(ok, truth[units], wrong)
    return units, names[picks], labels, truth


def simulate_gold_stream(
    n: int,
    accuracy: float = 0.9,
    drift_at: int | None = None,
    drift_accuracy: float = 0.6,
    seed: int = 0,
) -> np.ndarray:
    """Correct/incorrect outcomes of one rater on ``n`` gold items, dropping at ``drift_at``."""
    rng = np.random.default_rng(seed)
    p = np.full(n, accuracy)
    if drift_at is not None:
        p[drift_at:] = drift_accuracy
    return rng.random(n) < p


def overlap_items_for_alpha_ci(
    width: float,
    expected_alpha: float = 0.6,
    raters_per_item: int = 3,
    n_classes: int = 2,
    confidence: float = 0.95,
    pilot_items: int = 200,
    n_sims: int = 200,
    seed: int = 0,
) -> int:
    """How many items labelled by ``raters_per_item`` raters give an alpha CI of about ``width``.

    Simulates nominal data whose alpha is near ``expected_alpha`` (each label is the unit's true
    class with probability ``sqrt(expected_alpha)``-ish, else uniform), measures the spread of
    alpha over ``n_sims`` pilot studies of ``pilot_items`` items, and scales by ``1/sqrt(n)``:
    ``n = pilot * (2 z sd / width)^2``.
    """
    if not 0 < width < 2:
        raise ValueError(f"width must be in (0, 2), got {width}")
    rng = np.random.default_rng(seed)
    keep = np.sqrt(max(expected_alpha, 0.0))
    alphas = []
    units = np.repeat(np.arange(pilot_items), raters_per_item)
    for _ in range(n_sims):
        truth = rng.integers(0, n_classes, pilot_items)
        labels = np.where(
            rng.random(len(units)) < keep, truth[units], rng.integers(0, n_classes, len(units))
        )
        alphas.append(krippendorff_alpha(units, labels, "nominal"))
    sd = float(np.nanstd(alphas))
    z = float(__import__("scipy.stats", fromlist=["norm"]).norm.ppf(1 - (1 - confidence) / 2))
    return int(np.ceil(pilot_items * (2 * z * sd / width) ** 2))
