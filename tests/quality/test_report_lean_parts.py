"""The parts of the report's lean read and fold that replace a general operation with a faster
one of the same result (issue 27, ``repcpu``): the agreement rows' unit ranks by Python's sort
(:func:`preflab.quality.accumulate._ranks`, ``np.unique``'s codes), the formatting counts from
feature rows (:meth:`FormattingCounts.add_rows`, :meth:`~FormattingCounts.add_many`'s sums),
SQLite's rater keys read by pk rather than joined (``quality_read._with_rater_keys``, the join's
rows), and a plain item's stored text statistics (its entry as the memo gives it)."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest

from preflab.io import quality_read
from preflab.quality import accumulate_columns
from preflab.quality.accumulate import TextFeatures, _long, _ranks
from preflab.quality.bias import FEATURE_NAMES, FormattingCounts
from preflab.quality.text_stats import MEMO


def _unique_codes(names: list[object]) -> np.ndarray:
    objects = np.empty(len(names), dtype=object)
    objects[:] = names
    _, codes = np.unique(objects, return_inverse=True)
    return codes.reshape(-1).astype(np.int64)


@pytest.mark.parametrize("seed", range(5))
def test_ranks_equal_np_unique_codes(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ab|:é_ZΩ0"
    names = list(
        {
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
            for _ in range(rng.randint(0, 300))
        }
    )
    rng.shuffle(names)
    assert len(set(names)) == len(names)
    got = _ranks(names)
    assert got.dtype == np.int64
    assert got.tolist() == _unique_codes(names).tolist()
    # with repeated names (not distinct: np.unique's path), and names that are not all str
    repeated = names + names[: len(names) // 2]
    rng.shuffle(repeated)
    assert _ranks(repeated).tolist() == _unique_codes(repeated).tolist()
    assert _ranks([3, 1, 2]).tolist() == [2, 0, 1]


def test_ranks_of_no_names_and_long() -> None:
    assert _ranks([]).tolist() == []
    units, values = _long(["b::x", "a::y", "c"], [(0.0, 1.0), (1.0,), (-1.0, 0.0, 1.0)])
    assert units.tolist() == [1, 1, 0, 2, 2, 2]
    assert values.tolist() == [0.0, 1.0, 1.0, -1.0, 0.0, 1.0]


def test_formatting_rows_equal_add_many() -> None:
    rng = random.Random(7)
    chosen = [tuple(rng.choice([0, 0, 1, 2, 5]) for _ in FEATURE_NAMES) for _ in range(400)]
    rejected = [tuple(rng.choice([0, 0, 1, 3]) for _ in FEATURE_NAMES) for _ in range(400)]
    by_rows, by_dicts, one_by_one = FormattingCounts(), FormattingCounts(), FormattingCounts()
    for start in range(0, 400, 150):  # several calls, as several runs make
        by_rows.add_rows(chosen[start : start + 150], rejected[start : start + 150])
        by_dicts.add_many(
            [dict(zip(FEATURE_NAMES, c, strict=True)) for c in chosen[start : start + 150]],
            [dict(zip(FEATURE_NAMES, r, strict=True)) for r in rejected[start : start + 150]],
        )
    for c, r in zip(chosen, rejected, strict=True):
        one_by_one.add(dict(zip(FEATURE_NAMES, c)), dict(zip(FEATURE_NAMES, r)))
    by_rows.add_rows([], [])
    assert by_rows.n == by_dicts.n == one_by_one.n == 400
    assert by_rows.per_feature == by_dicts.per_feature == one_by_one.per_feature
    assert by_rows.result() == one_by_one.result()
    assert any(acc[3] for acc in by_rows.per_feature.values())


def _raters_db() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE raters (pk INTEGER PRIMARY KEY, rater_key TEXT)")
    con.executemany("INSERT INTO raters VALUES (?, ?)", [(k, f"rater-{k}") for k in range(1, 900)])
    con.execute("CREATE TABLE j (pk INTEGER PRIMARY KEY, rater_pk INTEGER, x TEXT, y INTEGER)")
    rng = random.Random(3)
    # raters 2000 and 2001 are not in the table: the join drops their rows
    rows = [(k, rng.choice([*range(1, 900), 2000, 2001]), f"x{k}", k % 7) for k in range(3000)]
    con.executemany("INSERT INTO j VALUES (?, ?, ?, ?)", rows)
    return con


JOINED = "SELECT r.rater_key, j.x, j.y FROM j JOIN raters AS r ON r.pk = j.rater_pk ORDER BY j.pk"


def _by_pk(cursor, keys: dict, chunk: int) -> tuple[list[object], int]:
    """Every row of ``j`` through ``_with_rater_keys``, ``chunk`` rows at a time (the keys kept
    between chunks), and the most keys held after a chunk."""
    got: list[object] = []
    largest = 0
    for start in range(0, 3000, chunk):
        rows = cursor.execute(
            "SELECT rater_pk, x, y FROM j WHERE pk >= ? AND pk < ? ORDER BY pk",
            (start, start + chunk),
        ).fetchall()
        got.extend(quality_read._with_rater_keys(cursor, rows, keys))
        largest = max(largest, len(keys))
    return got, largest


def test_rater_keys_by_pk_equal_the_join() -> None:
    cursor = _raters_db().cursor()
    joined = cursor.execute(JOINED).fetchall()
    keys: dict[object, object] = {}
    # in chunks, more than 500 missing at first
    got, _ = _by_pk(cursor, keys, 1200)
    assert got == joined
    assert len(got) < 3000  # some rows had no rater
    used = {pk for (pk,) in cursor.execute("SELECT DISTINCT rater_pk FROM j WHERE rater_pk < 900")}
    assert set(keys) == used  # each rater read once, only those the rows name
    # a chunk whose every rater is missing: no row
    assert quality_read._with_rater_keys(cursor, [(2000, "x", 1)], keys) == []


def test_rater_keys_past_the_bound_are_read_again(monkeypatch) -> None:
    """The cache of keys is emptied past its bound (one rater a label does not grow it with
    the project) and the rows are the join's all the same."""
    monkeypatch.setattr(quality_read, "RATER_KEYS_BOUND", 50)
    cursor = _raters_db().cursor()
    got, largest = _by_pk(cursor, {}, 100)
    assert got == cursor.execute(JOINED).fetchall()
    assert largest <= 50 + 100  # the bound plus one chunk's raters


def test_a_stored_entry_is_the_memos() -> None:
    """A plain item's candidate whose statistics are stored gets the entry
    TextFeatures.entry makes of the memo's (the words, the features by name)."""
    text = "## Plan\n- **one** step"
    features = (1, 1, 1, 0, 0)
    MEMO.clear()
    try:
        MEMO.put(text, ("tok", 5, 4, features))
        expected = TextFeatures(8).entry(text)
    finally:
        MEMO.clear()
    assert accumulate_columns._stored_entry((4, features)) == expected


def test_ndtri_is_norm_ppf() -> None:
    from scipy.special import ndtri
    from scipy.stats import norm

    for confidence in [0.5, 0.8, 0.9, 0.95, 0.99, 0.999]:
        q = 1 - (1 - confidence) / 2
        assert ndtri(q) == norm.ppf(q)
