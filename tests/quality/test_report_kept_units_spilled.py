"""An agreement row's kept units with their names on disk (``quality/accumulate.py``:
``KeptUnits``, ``KEPT_NAMES``): past a few bytes of names in memory they go to a temporary
file, and the names, values, rows and the whole report are the ones kept in memory give."""

from __future__ import annotations

import gc
import os
import random

import pytest

from preflab.quality import accumulate, build_report
from preflab.quality.accumulate import AgreementGroup, KeptUnits, NamesInMemory
from preflab.quality.report import report_from_items

from .test_report_kept_units import _units
from .test_report_streaming import assert_same, by_item, generated_project, store_project

NAMES = ["b::x|y", "a::東京|ü", "c::\ud800", "", "it-17::c1|c2", "z" * 300]


@pytest.mark.parametrize("spill", [0, 1, 5, 64, 1 << 20])
def test_kept_units_on_disk_give_back_names_and_values_in_order(spill):
    rng = random.Random(spill)
    kept = KeptUnits(spill=spill)
    want: list[tuple[str, tuple[float, ...]]] = []
    for k in range(200):
        if k % 3:
            name = rng.choice(NAMES) + str(k)
            values = (float(rng.choice((-1, 1))),) * rng.randint(1, 3)
            kept.add(name, values)
            want.append((name, values))
        else:  # a run in one append: ASCII, or not
            run = [f"run{k}-{j}" + rng.choice(("", "é")) for j in range(rng.randint(0, 5))]
            vals = [(1.0, 1.0)] * len(run)
            kept.add_many(run, vals)
            want += list(zip(run, vals))
    assert len(kept) == len(want)
    assert kept.unit_names() == [n for n, _ in want]
    assert kept.unit_names() == [n for n, _ in want]  # read again: the same
    assert list(kept.values()) == [v for _, v in want]
    if spill < 1 << 20:
        assert kept.path is not None and os.path.exists(kept.path)
        assert kept.n_written > 0 and len(kept.names) <= spill + 400
        path = kept.path
        del kept
        gc.collect()
        assert not os.path.exists(path)  # removed with the units
    else:
        assert kept.path is None  # small: nothing written


def test_a_row_that_samples_removes_its_file():
    group = AgreementGroup(bound=50)
    group.units = KeptUnits(spill=10)
    for name, values in _units(random.Random(1), 40, continuous=False):
        group.add_unit(name, values, ["r"])
    path = group.units.path
    assert path is not None and os.path.exists(path)
    for name, values in _units(random.Random(2), 40, continuous=False):
        group.add_unit(name, values, ["r"])
    assert group.sample is not None
    assert not os.path.exists(path)


@pytest.mark.parametrize("continuous", [False, True])
def test_an_exact_row_is_the_same_with_its_names_on_disk(continuous):
    units = _units(random.Random(7), 300, continuous=continuous)
    rows = []
    for spill in (1 << 20, 0, 17):
        group = AgreementGroup(bound=1000)
        group.units = KeptUnits(spill=spill)
        for name, values in units:
            group.add_unit(name, values, ["r"])
        rows.append(group.row(("all", "rubric", "score"), {"score": "interval"}, n_boot=30))
    assert rows[0]["alpha_low"] < rows[0]["alpha_high"]
    assert rows[1] == rows[0] and rows[2] == rows[0]


def _reference(n_batches: int):
    """The generated project over ``n_batches`` batches and build_report's report of it."""
    js, items = generated_project()
    batches = {
        i: f"batch {int(i[2:]) % n_batches}" if i.startswith("it") else "none" for i in items
    }
    ordered = [j for g, _ in by_item(js, items) for j in g]
    return js, items, batches, build_report(ordered, items=items, batches=batches, n_boot=40)


def test_the_report_is_the_same_with_a_few_bytes_of_names_in_memory(monkeypatch):
    """The generated project (every kind, batches) with 3 bytes of names held per row: its
    rows' names all go through the files; the report equals build_report's."""
    js, items, batches, old = _reference(n_batches=3)
    written = []
    original = KeptUnits._write

    def counted(self):
        written.append(len(self.ends))
        original(self)

    monkeypatch.setattr(accumulate, "KEPT_NAMES", 3)
    monkeypatch.setattr(KeptUnits, "_write", counted)
    new = report_from_items(by_item(js, items), batches=batches, n_boot=40)
    assert sum(written) > 100
    assert_same(old, new)


def test_the_report_from_the_store_with_names_on_disk(db_url, monkeypatch):
    """SQLite and PostgreSQL (the plain items' column path too): the same report with every
    row's names written out as with them in memory."""
    from preflab.io.quality_source import report_from_store

    store_project(db_url)
    want = report_from_store(db_url, "gen", n_boot=30)
    written = []
    original = KeptUnits._write

    def counted(self):
        written.append(len(self.ends))
        original(self)

    monkeypatch.setattr(accumulate, "KEPT_NAMES", 3)
    monkeypatch.setattr(KeptUnits, "_write", counted)
    assert_same(want, report_from_store(db_url, "gen", n_boot=30))
    assert sum(written) > 100


def test_many_rows_hold_at_most_the_shared_names_in_memory():
    """Rows of a report share one budget of names in memory (``NamesInMemory``): with 60 rows
    of 40 units each (no row near its own ``KEPT_NAMES``), the names held together never pass
    the limit by more than one add, the fullest rows write theirs out, and every row gives back
    its names and values in order."""
    shared = NamesInMemory(limit=4096)
    rng = random.Random(5)
    rows = [KeptUnits(shared=shared) for _ in range(60)]
    want: list[list[tuple[str, tuple[float, ...]]]] = [[] for _ in rows]
    highest = 0
    for step in range(40):
        for k, kept in enumerate(rows):
            name = f"batch{k}-item{step}-{rng.randrange(10**6)}::a|b" + "é" * (k % 2)
            values = (float(rng.choice((-1, 1))),) * rng.randint(1, 3)
            if step % 2:
                kept.add_many([name], [values])
            else:
                kept.add(name, values)
            want[k].append((name, values))
            highest = max(highest, shared.held)
            assert shared.held == sum(r.held() for r in rows)
    assert 0 < highest <= 4096 + 100  # the limit and one name with its end
    assert sum(kept.n_written > 0 for kept in rows) > 30  # without the budget: none written
    for kept, units in zip(rows, want, strict=True):
        assert kept.unit_names() == [n for n, _ in units]
        assert list(kept.values()) == [v for _, v in units]
    rows[0].close()
    assert shared.held == sum(r.held() for r in rows[1:])
    assert rows[0] not in shared.rows


def test_the_report_of_many_batches_holds_its_names_within_the_shared_limit(monkeypatch):
    """The generated project over 40 batches with 256 bytes of names held by all rows
    together: names are written out though no row reaches its own limit, and the report
    equals build_report's."""
    js, items, batches, old = _reference(n_batches=40)
    highest = []
    original = NamesInMemory.grew

    def grew(self, size):
        original(self, size)
        highest.append(self.held)

    monkeypatch.setattr(accumulate, "KEPT_NAMES_TOTAL", 256)
    monkeypatch.setattr(NamesInMemory, "grew", grew)
    new = report_from_items(by_item(js, items), batches=batches, n_boot=40)
    assert highest and max(highest) <= 256 + 200
    assert_same(old, new)
