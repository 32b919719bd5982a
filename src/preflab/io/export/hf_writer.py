"""A Hugging Face ``datasets`` directory written from a stream of tables, in bounded memory.

The directory is what ``DatasetDict({split: Dataset(table)}).save_to_disk(directory,
num_shards={split: n})`` writes (read back with ``datasets.load_from_disk``), without the one
table: ``dataset_dict.json``; ``SPLIT/data-0000i-of-0000n.arrow``, each an Arrow stream written
with ``datasets``' own :class:`~datasets.arrow_writer.ArrowWriter` (its features in the schema
metadata, its casts), record batches of ``writer_batch_size`` rows; ``SPLIT/state.json`` and
``SPLIT/dataset_info.json`` as ``save_to_disk`` writes them.

What ``save_to_disk`` decides from the whole table, this writer knows only at the end: the shard
count (the table's bytes over :data:`SHARD_BYTES`, rows split evenly between shards, as
``Dataset.shard(contiguous=True)`` does) and the record batch rows
(:data:`BATCH_ROWS` unless a row averages more than ``datasets``' 100 MB row group over
:data:`BATCH_ROWS`). So the tables are written as they come into the one shard of the common
case (under 500 MiB of rows, rows of less than ~100 KB); only when the end says otherwise is that
file read back as a stream, batch by batch, into the shards the whole table would have made, and
removed. Either way the shard files are byte-identical to ``save_to_disk``'s.

One field differs: ``state.json``'s ``_fingerprint``. ``datasets`` derives it from a pickle of
the whole in-memory table (a copy of every byte, in memory); here it is the xxh64 (the hash
``datasets`` uses) of the split name and the shard files' bytes as they are written: the same
data gives the same fingerprint, other data another. ``datasets`` reads it only as the key of
its own caches (``map``, ``filter``); it is not data.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from .base import ExportError

#: the bytes of rows a shard holds at most (500 MiB; ``datasets`` defaults to 500 MB)
SHARD_BYTES = 500 << 20
#: rows of a record batch (``datasets.config.DEFAULT_MAX_BATCH_SIZE``)
BATCH_ROWS = 1_000
#: bytes of a record batch at most, fewer rows when rows are larger (``MAX_ROW_GROUP_SIZE``)
BATCH_BYTES = 100 * 10**6
SPILL = ".spill.arrow"


def _datasets() -> Any:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ExportError(
            "file format 'hf' needs the 'datasets' package: pip install 'preflab[train]' "
            "(or choose --file-format jsonl/parquet)"
        ) from exc
    return datasets


def plan(rows: int, nbytes: int) -> tuple[int, int]:
    """``(shards, batch rows)`` for a table of ``rows`` rows and ``nbytes`` bytes, as
    ``save_to_disk`` decides them (the shard count as preflab has always asked for it)."""
    shards = max(1, -(-nbytes // SHARD_BYTES))
    batch = min(BATCH_ROWS, max(1, rows * BATCH_BYTES // nbytes)) if nbytes > 0 else BATCH_ROWS
    return shards, batch


def shard_name(index: int, shards: int) -> str:
    return f"data-{index:05d}-of-{shards:05d}.arrow"


class _Digest:
    """A binary file that hashes what is written to it (the fingerprint of the shards)."""

    def __init__(self, path: Path, digest: Any) -> None:
        self.file = path.open("wb")
        self.digest = digest
        self.closed = False

    def write(self, data: Any) -> int:
        self.digest.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def tell(self) -> int:
        return self.file.tell()

    def close(self) -> None:
        self.file.close()
        self.closed = True


def shard_sizes(rows: int, shards: int) -> list[int]:
    """The rows of each shard, as ``Dataset.shard(shards, i, contiguous=True)`` splits them."""
    div, mod = divmod(rows, shards)
    return [div + (1 if i < mod else 0) for i in range(shards)]


class _Shards:
    """Tables written into shard files of ``sizes`` rows (``None``: any number), each shard
    written in tables of ``batch`` rows cut as ``save_to_disk`` cuts them.

    ``save_to_disk`` writes shard ``i`` as ``datasets.table.table_iter(shard, batch)``: the
    shard's chunks (the whole table's, cut at the shard's ends) split into pieces of ``batch``
    rows from each chunk's start, pieces gathered until ``batch`` rows (the last piece cropped,
    its rest starting the next table). A table of one piece is written as a slice of its chunk,
    one of several pieces concatenated; the Arrow stream writer writes a slice's buffers (and
    padding) otherwise than a fresh array's, so the same cuts are what make the same bytes."""

    def __init__(
        self, directory: Path, features: Any, sizes: list[int | None], batch: int, digest: Any
    ) -> None:
        self.directory, self.features, self.digest = directory, features, digest
        self.sizes, self.shards, self.batch = sizes, len(sizes), batch
        self.index = -1
        self.writer: Any = None
        self.left = 0  # rows the current shard still takes
        self.pieces: list[pa.RecordBatch] = []
        self.piece_rows = 0

    def _open(self) -> None:
        from datasets.arrow_writer import ArrowWriter

        self.index += 1
        name = shard_name(self.index, self.shards)
        self.stream = pa.PythonFile(_Digest(self.directory / name, self.digest), mode="w")
        # as `Dataset._save_to_disk_single` makes it (a stream instead of a path: the digest)
        self.writer = ArrowWriter(
            features=self.features, stream=self.stream, embed_local_files=True
        )
        size = self.sizes[self.index]
        self.left = size if size is not None else sys.maxsize

    def _emit(self) -> None:
        self.writer.write_table(pa.Table.from_batches(self.pieces))
        self.pieces, self.piece_rows = [], 0

    def _close(self) -> None:
        if self.pieces:
            self._emit()
        self.writer.finalize(close_stream=False)
        self.stream.close()
        self.writer = None

    def _piece(self, piece: pa.RecordBatch) -> None:
        """``table_iter``'s gathering of one piece (at most ``batch`` rows)."""
        n = piece.num_rows
        if self.piece_rows + n < self.batch:
            self.pieces.append(piece)
            self.piece_rows += n
        elif self.piece_rows + n == self.batch:
            self.pieces.append(piece)
            self._emit()
        else:
            crop = self.batch - self.piece_rows
            self.pieces.append(piece.slice(0, crop))
            self._emit()
            self.pieces, self.piece_rows = [piece.slice(crop)], n - crop

    def write(self, table: pa.Table) -> None:
        """One chunk of the whole table (one array a column)."""
        for chunk in table.to_batches():
            while chunk.num_rows:
                if self.writer is None:
                    self._open()
                if not self.left:  # this shard is full (or has no row at all)
                    self._close()
                    continue
                part = chunk.slice(0, min(chunk.num_rows, self.left))
                for start in range(0, part.num_rows, self.batch):
                    self._piece(part.slice(start, self.batch))
                self.left -= part.num_rows
                chunk = chunk.slice(part.num_rows)

    def finish(self) -> None:
        """Close the last shard; every shard left (an empty export: one) gets its file."""
        while self.index < self.shards - 1 or self.writer is not None:
            if self.writer is None:
                self._open()
            self._close()


def write_hf(directory: Path, tables: Iterable[pa.Table], schema: pa.Schema, split: str) -> int:
    """The ``datasets`` directory of ``tables`` (each with ``schema``) as its ``split``; its rows.

    Memory: one record batch (:data:`BATCH_ROWS` rows) plus the table being cut."""
    datasets = _datasets()
    import xxhash
    from datasets.table import table_cast

    features = datasets.Features.from_arrow_schema(schema)
    target = features.arrow_schema
    out = directory / split
    out.mkdir(parents=True, exist_ok=True)
    (directory / "dataset_dict.json").write_text(json.dumps({"splits": [split]}), "utf-8")
    # what `save_to_disk` would decide for a small table; kept when the end says so
    guess = (1, BATCH_ROWS)
    digest = xxhash.xxh64(split.encode())
    first = _Shards(out, features, [None], guess[1], digest)
    rows = nbytes = 0
    cuts = array("q")  # the rows of each table: the chunks of the table `datasets` would wrap
    for table in tables:
        if not table.num_rows:
            continue
        if table.schema != target:  # as `Dataset(table)` casts it to its features
            table = table_cast(table, target)
        rows += table.num_rows
        nbytes += table.nbytes
        cuts.append(table.num_rows)
        first.write(table)
    first.finish()
    shards, batch = plan(rows, nbytes)
    if (shards, batch) != guess:
        spill = out / SPILL
        os.replace(out / shard_name(0, 1), spill)
        digest = xxhash.xxh64(split.encode())
        again = _Shards(out, features, list(shard_sizes(rows, shards)), batch, digest)
        for table in _recut(_read_back(spill), cuts):
            again.write(table)
        again.finish()
        spill.unlink()
    _write_state(out, datasets, features, split, shards, digest.hexdigest())
    return rows


def _contiguous(table: pa.Table) -> pa.Table:
    """``table`` with each column one array of its own buffers, sized to its rows, as
    ``pa.array`` builds a batch's columns (a batch read back from a stream file has the file's
    padding, which the stream writer would write again)."""
    return pa.Table.from_arrays(
        [pa.concat_arrays(c.chunks) for c in table.columns], schema=table.schema
    )


def _read_back(path: Path) -> Iterator[pa.Table]:
    """The record batches of an Arrow stream file, one at a time (read, not memory-mapped)."""
    with pa.OSFile(str(path)) as f:
        for batch in pa.ipc.open_stream(f):
            yield pa.Table.from_batches([batch])


def _recut(tables: Iterator[pa.Table], cuts: Iterable[int]) -> Iterator[pa.Table]:
    """``tables`` re-cut into tables of ``cuts`` rows, each contiguous (:func:`_contiguous`)."""
    pending: list[pa.Table] = []
    have = 0
    for size in cuts:
        while have < size:
            pending.append(next(tables))
            have += pending[-1].num_rows
        whole = pa.concat_tables(pending)
        rest = whole.slice(size)
        cut = _contiguous(whole.slice(0, size))
        # the batches read are let go before the table is written (only its copy is held, and
        # the rows of the last batch past the cut)
        del whole
        pending, have = ([rest] if rest.num_rows else []), rest.num_rows
        yield cut
        del cut


def _write_state(
    out: Path, datasets: Any, features: Any, split: str, shards: int, fingerprint: str
) -> None:
    """``state.json`` and ``dataset_info.json`` as ``Dataset.save_to_disk`` writes them."""
    state: dict[str, Any] = {
        "_data_files": [{"filename": shard_name(i, shards)} for i in range(shards)],
        "_fingerprint": fingerprint,
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": split,
    }
    with (out / "state.json").open("w", encoding="utf-8") as f:
        json.dump(state, f, indent=2, sort_keys=True)
    from datasets.utils.py_utils import asdict

    info = asdict(datasets.DatasetInfo(features=features))
    with (out / "dataset_info.json").open("w", encoding="utf-8") as f:
        json.dump({key: info[key] for key in sorted(info)}, f, indent=2)
