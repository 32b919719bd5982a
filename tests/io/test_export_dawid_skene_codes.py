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
    DROP_REASONS,
    MIRROR,
    DawidSkeneFit,
    VoteColumns,
    aggregate_pairwise_dawid_skene,
    unit_key,
)
from preflab.io.export.resolve import DropLog, PairVote
from preflab.io.export.spill import Spill
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


def _chunked(votes: list[PairVote], n_chunks: int) -> list[list[PairVote]]:
    """The votes in calls of whole items (as a streamed export reads chunks of items), the
    items in an order of their own (first appearance here, not the keys' sorted order)."""
    items = list(dict.fromkeys(v.item_id for v in votes))
    per = max(1, -(-len(items) // n_chunks))
    chunk_of = {item: i // per for i, item in enumerate(items)}
    calls: list[list[PairVote]] = [[] for _ in range(n_chunks)]
    for v in votes:
        calls[chunk_of[v.item_id]].append(v)
    return [c for c in calls if c]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize(
    ("n_chunks", "run_keys", "rows", "on_disk"),
    [(1, None, None, False), (7, 5, 3, True), (7, 5, 3, False), (3, 1, 1000, True)],
)
def test_fit_on_codes_equals_fit_on_strings(
    seed: int,
    ties: bool,
    n_chunks: int,
    run_keys: int | None,
    rows: int | None,
    on_disk: bool,
    tmp_path: Path,
) -> None:
    """Across chunks (calls), sorted runs of keys (on disk or in memory, tiny runs: many) and
    E-step blocks, the fit is the fit on the strings, unit for unit."""
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
    with Spill(near=tmp_path / "out.jsonl") as spill:
        columns = VoteColumns(spill if on_disk else None, run_keys=run_keys)
        calls = _chunked(votes, n_chunks)
        for call in calls:
            columns.add(call)
        if run_keys == 1:
            assert len(columns.runs) >= len(calls) > 1
        assert spill.used == on_disk
        fit = DawidSkeneFit(columns, rows=rows)
        units = reference.units.tolist()
        assert list(fit.keys()) == units
        # the keys' sorted order is not the order they were read in (else the test is idle)
        read = list(dict.fromkeys(unit_key(v) for call in calls for v in call))
        assert read != units
        assert np.array_equal(fit.classes, reference.classes)
        for call in calls:
            order = list(dict.fromkeys(unit_key(v) for v in call))
            posteriors, labels = fit._rows_of(order)
            ranks = [units.index(u) for u in order]
            assert np.array_equal(posteriors, reference.posteriors[ranks])  # bit for bit
            assert labels.tolist() == reference.labels[ranks].tolist()
        # what drops() logs: the reference's verdict of each unit on the sides its votes took
        for k, unit in enumerate(units):
            took = {s for v, s in zip(votes, signs, strict=True) if unit_key(v) == unit}
            posterior, label = reference.posteriors[k], int(reference.labels[k])
            why = fit.verdict(posterior, label, took)
            code = int(fit.drop_code[k])
            assert (DROP_REASONS[code] if code else label) == why


@pytest.mark.parametrize("seed", range(3))
def test_chunked_decisions_equal_the_one_call_decisions(seed: int, tmp_path: Path) -> None:
    """A streamed export's fit (calls of whole items, keys in tiny runs on disk) decides each
    chunk as the one-call aggregator decides those pairs; its drop log over every unit equals
    the one-call log; a subset of a chunk (not a call of pass 0) is decided by key too."""
    votes = _votes(seed, n_items=120)
    ref_drops = DropLog()
    ref = aggregate_pairwise_dawid_skene(votes, ref_drops)
    with Spill(near=tmp_path / "out.jsonl") as spill:
        columns = VoteColumns(spill, run_keys=7)
        calls = _chunked(votes, 9)
        for call in calls:
            columns.add(call)
        fit = DawidSkeneFit(columns, rows=5)
        got = [pair for call in calls for pair in fit.decide(call)]
        key = lambda p: (p.item_id, min(p.chosen_id, p.rejected_id))  # noqa: E731
        assert sorted(got, key=key) == sorted(ref, key=key)
        logged = DropLog()
        fit.drops(logged)
        assert logged.summary() == ref_drops.summary()
        part = [v for v in calls[0] if v.item_id == calls[0][0].item_id]
        assert fit.decide(part) == [p for p in ref if p.item_id == part[0].item_id]


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
