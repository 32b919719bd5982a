"""Parquet row groups bounded by rows and by bytes (issue 27: exports in constant memory).

:func:`preflab.io.export.writers.row_groups` cuts the rows where they pass
``ROW_GROUP_ROWS`` rows or ``ROW_GROUP_BYTES`` bytes of Arrow data, whatever batches they
came in, so the in-memory and the streamed export write the same file, and a writer holds one
bounded group at a time.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflab.io.export import writers
from preflab.io.export.writers import row_bytes, row_groups, write_parquet

CHAT = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SCHEMA = pa.schema(
    [("prompt", CHAT), ("chosen", pa.string()), ("margin", pa.float64()), ("keep", pa.bool_())]
)


def _rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turns = [
            {"role": "user", "content": "q" * rng.randrange(0, 300)}
            for _ in range(rng.randrange(0, 3))
        ]
        out.append(
            {
                "prompt": turns,
                "chosen": "a" * rng.choice((0, 5, 50, 900)),
                "margin": None if i % 7 == 0 else rng.random(),
                "keep": i % 3 == 0,
            }
        )
    return out


def _batch(rows: list[dict]) -> dict[str, list]:
    return {name: [r[name] for r in rows] for name in SCHEMA.names}


def _cut(rows: list[dict], cuts: list[int]) -> list[dict[str, list]]:
    bounds = [0, *cuts, len(rows)]
    return [_batch(rows[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def test_row_bytes_are_each_rows_values_and_offsets():
    chat = pa.array(
        [[{"role": "user", "content": "abc"}], [], None, [{"role": "ai", "content": ""}] * 2],
        type=CHAT,
    )
    # a list: its offset (4) and its elements'; an element: each string's bytes and offset (4)
    assert row_bytes(chat).tolist() == [4 + (4 + 4) + (4 + 3), 4, 4, 4 + 2 * ((4 + 2) + (4 + 0))]
    text = pa.array(["", "abcd", None, "é"])
    assert row_bytes(text).tolist() == [4, 8, 4, 6]
    assert row_bytes(pa.array([1.0, None, 2.0])).tolist() == [8, 8, 8]
    assert row_bytes(pa.array([True, False])).tolist() == [1, 1]
    for array in (chat, text):  # a slice counts its own rows only
        assert row_bytes(array.slice(1, 2)).tolist() == row_bytes(array).tolist()[1:3]
    chunked = pa.chunked_array([text.slice(0, 1), text.slice(1)])
    assert row_bytes(chunked).tolist() == row_bytes(text).tolist()


@pytest.mark.parametrize("max_rows,max_bytes", [(50, 10**9), (10**6, 3_000), (17, 2_000)])
def test_groups_end_where_the_rows_pass_a_bound_whatever_the_batches(
    max_rows, max_bytes, tmp_path, monkeypatch
):
    monkeypatch.setattr(writers, "ROW_GROUP_ROWS", max_rows)
    monkeypatch.setattr(writers, "ROW_GROUP_BYTES", max_bytes)
    rows = _rows(400)
    whole = pa.Table.from_pylist(rows, schema=SCHEMA)
    sizes = sum(row_bytes(c) for c in whole.columns)
    files = []
    for n, cuts in enumerate(([], [1, 2, 3, 100, 101, 399], list(range(7, 400, 7)))):
        path = tmp_path / f"{n}.parquet"
        assert write_parquet(path, iter(_cut(rows, cuts)), SCHEMA) == len(rows)
        files.append(path.read_bytes())
    assert files[1] == files[0] and files[2] == files[0], "the same cuts, the same bytes"
    meta = pq.ParquetFile(tmp_path / "0.parquet").metadata
    assert meta.num_row_groups > 1
    start = 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        group = int(np.sum(sizes[start : start + n]))
        assert n <= max_rows and (group <= max_bytes or n == 1)
        if start + n < len(rows):  # it ended because the next row passes a bound
            assert n == max_rows or group + int(sizes[start + n]) > max_bytes
        start += n
    assert start == len(rows)
    back = pq.read_table(tmp_path / "0.parquet")
    assert back.schema == SCHEMA and back.equals(whole), "the same rows, values and schema"


def test_a_row_over_the_byte_bound_is_a_group_of_its_own():
    rows = [{"prompt": [], "chosen": c, "margin": 1.0, "keep": True} for c in ("a", "b" * 500, "c")]
    groups = list(row_groups(iter([_batch(rows)]), SCHEMA, rows=100, nbytes=100))
    assert [g.num_rows for g in groups] == [1, 1, 1]
    assert [g.column("chosen").to_pylist() for g in groups] == [["a"], ["b" * 500], ["c"]]
    for g in groups:  # contiguous columns, as the in-memory batches are
        assert all(c.num_chunks == 1 for c in g.columns)


def test_an_empty_export_is_a_valid_empty_file(tmp_path):
    assert write_parquet(tmp_path / "e.parquet", iter([_batch([])]), SCHEMA) == 0
    back = pq.read_table(tmp_path / "e.parquet")
    assert back.num_rows == 0 and back.schema == SCHEMA
