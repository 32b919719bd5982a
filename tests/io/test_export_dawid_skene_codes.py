"""The export's Dawid-Skene fit on integer codes equals the fit on the vote strings, to the bit.

:class:`preflab.io.export.aggregators.DawidSkeneFit` numbers units and raters in the sorted
order of their keys and fits on those codes (a vote costs 9 bytes instead of numpy's fixed-width
unicode copies of its strings). Held here against :func:`dawid_skene` called on the strings as
the export used to call it: the same unit order, posteriors, modes and decisions, on votes with
ids that sort differently as text than by first appearance (digits, case, non-ASCII).
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from preflab.io.export.aggregators import (
    MIRROR,
    DawidSkeneFit,
    VoteColumns,
    aggregate_pairwise_dawid_skene,
    unit_key,
)
from preflab.io.export.resolve import DropLog, PairVote
from preflab.quality.aggregation.dawid_skene import dawid_skene


def _reference_aggregator():
    """The one-call Dawid-Skene of ``export_reference.py`` (``tests/io`` is not a package)."""
    name = "export_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]._dawid_skene_reference


IDS = ["b", "B", "a10", "a9", "é", "z", "Ω", "item 2", "item 10", "x\ty"]


def _votes(seed: int, n_items: int = 60, ties: bool = True) -> list[PairVote]:
    rng = random.Random(seed)
    raters = [f"r{rng.randrange(1000)}" for _ in range(12)] + ["Zed", "ä"]
    out = []
    for i in range(n_items):
        item = f"{rng.choice(IDS)}-{i}"
        cands = sorted(rng.sample(["A", "b", "c10", "c9", "ü"], 3))
        for lo, hi in [(cands[0], cands[1]), (cands[1], cands[2])]:
            for rater in rng.sample(raters, rng.randrange(1, 5)):
                score = rng.choice([-1.0, -0.5, 0.5, 1.0, 0.0] if ties else [-1.0, 0.5, 1.0])
                out.append(PairVote(item, lo, hi, rater, "h", score, "human", 1, ()))
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [True, False])
def test_fit_on_codes_equals_fit_on_strings(seed: int, ties: bool) -> None:
    votes = _votes(seed, ties=ties)
    signs = [int((v.score > 0) - (v.score < 0)) for v in votes]
    classes = sorted({*signs, *(-s for s in signs)})
    reference = dawid_skene(
        [unit_key(v) for v in votes],
        [v.rater for v in votes],
        signs,
        classes=classes,
        mirror=MIRROR,
    )
    columns = VoteColumns()
    columns.add(votes)
    fit = DawidSkeneFit(columns)
    assert fit.units == reference.units.tolist()
    assert fit.index == {u: k for k, u in enumerate(reference.units.tolist())}
    assert np.array_equal(fit.posteriors, reference.posteriors)  # bit for bit
    assert fit.labels == reference.labels.tolist()
    assert np.array_equal(fit.classes, reference.classes)
    # each unit's sides, after the renumbering
    for unit in fit.units:
        took = {s for v, s in zip(votes, signs, strict=True) if unit_key(v) == unit}
        assert columns.sides(unit) == took


@pytest.mark.parametrize("seed", range(4))
def test_decisions_equal_the_reference_aggregator(seed: int) -> None:
    """The pairs and drops equal the one-call reference of ``tests/io/export_reference.py``
    (Dawid-Skene fitted on the strings)."""
    votes = _votes(seed, n_items=120)
    got_drops, ref_drops = DropLog(), DropLog()
    got = aggregate_pairwise_dawid_skene(votes, got_drops)
    ref = _reference_aggregator()(votes, ref_drops)
    assert got, "some pairs decided"
    assert got == ref
    assert got_drops.summary() == ref_drops.summary()
