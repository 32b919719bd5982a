"""The streamed ``datasets`` writer writes what ``save_to_disk`` writes from the whole table.

``hf_writer.write_hf`` gets the tables one at a time; ``DatasetDict.save_to_disk`` (the writer
before issue 27) gets them concatenated. Every file is byte-identical but ``state.json``'s
``_fingerprint``: with chunks smaller and larger than a record batch, nulls, nested columns, no
row at all, and with several shards and smaller record batches (the path that reads the first
file back), reached here by lowering the byte thresholds on both sides.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets
import pyarrow as pa
import pytest
from datasets.arrow_writer import get_writer_batch_size_from_data_size

from preflab.io.export import hf_writer

SCHEMA = pa.schema(
    [
        ("prompt", pa.string()),
        ("chosen", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("margin", pa.float64()),
        ("n", pa.int64()),
    ]
)


def tables(total: int, largest: int, seed: int = 1) -> list[pa.Table]:
    """``total`` rows in tables of 1 to ``largest`` rows (nulls in three columns)."""
    rng = random.Random(seed)
    out, done = [], 0
    while done < total:
        k = min(rng.randint(1, largest), total - done)
        rows = range(done, done + k)
        out.append(
            pa.Table.from_pydict(
                {
                    "prompt": [f"p{i} " * rng.randint(0, 30) if i % 7 else None for i in rows],
                    "chosen": [
                        [{"role": "user", "content": "x" * rng.randint(0, 50)}] if i % 11 else None
                        for i in rows
                    ],
                    "margin": [rng.random() if i % 3 else None for i in rows],
                    "n": list(rows),
                },
                schema=SCHEMA,
            )
        )
        done += k
    return out


def save_to_disk(directory: Path, parts: list[pa.Table]) -> None:
    """The writer before: one table, ``datasets``' ``save_to_disk`` with preflab's shard count."""
    table = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    dataset = datasets.Dataset(table, split=datasets.NamedSplit("train"))
    shards = max(1, -(-table.nbytes // hf_writer.SHARD_BYTES))
    datasets.DatasetDict({"train": dataset}).save_to_disk(
        str(directory), num_shards={"train": shards}
    )


def files(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def assert_same(tmp_path: Path, parts: list[pa.Table], given: list[pa.Table] | None = None) -> dict:
    ref, new = tmp_path / "ref", tmp_path / "new"
    save_to_disk(ref, parts)
    rows = hf_writer.write_hf(new, iter(given or parts), SCHEMA, "train")
    assert rows == sum(t.num_rows for t in parts)
    ref_files, new_files = files(ref), files(new)
    assert sorted(new_files) == sorted(ref_files)
    ref_state = json.loads(ref_files.pop("train/state.json"))
    new_state = json.loads(new_files.pop("train/state.json"))
    assert len(new_state.pop("_fingerprint")) == len(ref_state.pop("_fingerprint")) == 16
    assert new_state == ref_state
    for name, content in ref_files.items():
        assert new_files[name] == content, name
    loaded = datasets.load_from_disk(str(new))["train"]
    assert loaded.to_list() == datasets.load_from_disk(str(ref))["train"].to_list()
    assert loaded.features == datasets.Features.from_arrow_schema(SCHEMA)
    return new_state


def test_no_row(tmp_path):
    state = assert_same(tmp_path, [])
    assert state["_data_files"] == [{"filename": "data-00000-of-00001.arrow"}]


def test_tables_smaller_than_a_record_batch(tmp_path):
    assert_same(tmp_path, tables(2_500, 700))


def test_tables_larger_than_a_record_batch(tmp_path):
    assert_same(tmp_path, tables(7_777, 3_000))


def test_sliced_tables_are_written_as_their_own(tmp_path):
    """Tables that are views of a larger one's buffers (as the streamed re-cut into
    65,536-row batches hands some over) make the same bytes as tables of their own."""
    parts = tables(3_000, 2_000)
    whole = pa.concat_tables(parts).combine_chunks()  # one chunk a column
    sliced, at = [], 0
    for part in parts:
        sliced.append(whole.slice(at, part.num_rows))  # views of `whole`'s buffers
        at += part.num_rows
    assert_same(tmp_path, parts, given=sliced)


@pytest.mark.parametrize("row_group", [None, "7KB"])
def test_several_shards(tmp_path, monkeypatch, row_group):
    """Past the shard size (here 20 kB) the first file is read back into shards split as
    ``Dataset.shard`` splits them; rows past ``MAX_ROW_GROUP_SIZE`` / 1000 make smaller
    record batches."""
    monkeypatch.setattr(hf_writer, "SHARD_BYTES", 20_000)
    if row_group is not None:
        monkeypatch.setattr(hf_writer, "BATCH_BYTES", 7_000)
        monkeypatch.setattr(datasets.config, "MAX_ROW_GROUP_SIZE", row_group)
    parts = tables(2_345, 900)
    state = assert_same(tmp_path, parts)
    shards = -(-sum(t.nbytes for t in parts) // 20_000)
    assert shards > 3
    assert len(state["_data_files"]) == shards
    assert not list((tmp_path / "new").rglob(hf_writer.SPILL))


def test_the_fingerprint_follows_the_data(tmp_path):
    parts = tables(1_500, 400)
    prints = []
    for name, given in (("a", parts), ("b", parts), ("c", tables(1_500, 400, seed=2))):
        hf_writer.write_hf(tmp_path / name, iter(given), SCHEMA, "train")
        prints.append(
            json.loads((tmp_path / name / "train/state.json").read_text())["_fingerprint"]
        )
    assert prints[0] == prints[1] != prints[2]


def test_plan_is_save_to_disks():
    """``(shards, record batch rows)``: preflab's shard count, ``datasets``' batch rule."""
    assert hf_writer.plan(0, 0) == (1, 1_000)
    assert hf_writer.plan(10, 500) == (1, 1_000)
    assert hf_writer.plan(1_000_000, hf_writer.SHARD_BYTES) == (1, 1_000)
    assert hf_writer.plan(1_000_000, hf_writer.SHARD_BYTES + 1) == (2, 1_000)
    assert hf_writer.plan(1_000, 10**9) == (2, 100)  # 1 MB rows: 100 MB record batches
    assert hf_writer.plan(3, 10**9) == (2, 1)
    for rows, nbytes in ((1_000, 10**9), (3, 10**9), (123_456, 7 * 10**10)):
        assert hf_writer.plan(rows, nbytes)[1] == min(
            datasets.config.DEFAULT_MAX_BATCH_SIZE,
            get_writer_batch_size_from_data_size(rows, nbytes),
        )


def test_the_read_back_is_let_go_before_each_cut_is_written():
    """Re-cutting the first file into shards (``_recut``): while a cut is written, the batches
    read for it are no longer held, only its contiguous copy (and the rows of the last batch
    past the cut). Holding them doubled the pass's Arrow memory (a 16 MiB group read and its
    copy: +11-14 MB of peak RSS at 1M judgments once the rows pass ``SHARD_BYTES``)."""
    values = [("x" * 2000) + str(k) for k in range(6_000)]

    def read_back():  # batches of 500 rows, each in Arrow memory of its own, made when asked
        for start in range(0, len(values), 500):
            part = values[start : start + 500]
            yield pa.table({"text": pa.array(part, pa.string())})

    before = pa.total_allocated_bytes()
    held = []
    for cut in hf_writer._recut(read_back(), [2_400, 2_400, 1_200]):
        held.append(pa.total_allocated_bytes() - before - cut.nbytes)
        assert cut.column(0).num_chunks == 1
    # a cut of 2,400 rows is ~4.8 MB; the read batches (~1 MB each) are not held with it
    assert max(held) < 1.5 * 500 * 2_010, held
