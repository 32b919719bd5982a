"""Writers: JSONL, Parquet and Hugging Face ``datasets`` directories (:mod:`.hf_writer`),
written atomically.

Every export is built in a temporary directory beside the target and renamed into place only
when every file, the manifest and the card are written; on any error the temporary directory
is removed, so a failed export leaves nothing behind (and an older export at the same path is
kept). Replacing an older export swaps directories, then deletes the old one.

Parquet row groups (and the tables a ``datasets`` directory is cut from, :mod:`.hf_writer`) are
bounded twice, whatever batches the rows came in (:func:`row_groups`): at most
:data:`ROW_GROUP_ROWS` rows and at most :data:`ROW_GROUP_BYTES` bytes of Arrow data (each row's
values and offsets, :func:`row_bytes`); a group ends before the row that would pass either
bound (a single row larger than the byte bound is a group of its own). The writer holds one
group's rows, in the batches they came in, and copies them into contiguous columns one column
at a time, letting each column's pieces go once copied: memory that does not grow with the
project or with the size of its texts. A project whose every 65,536 rows are
under the byte bound gets the row groups it always had (the same bytes); past it the groups are
smaller, the rows and values the same.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ..gc_pause import gc_paused
from . import hf_writer
from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportError, ExportOptions

PARQUET_COMPRESSION = "zstd"
MANIFEST = "manifest.json"
CARD = "README.md"
#: JSONL lines encoded and written at a time
JSONL_LINES = 4_096
#: rows of a Parquet row group at most (the exporters' batches: :data:`~.base.BATCH_ROWS`)
ROW_GROUP_ROWS = BATCH_ROWS
#: bytes of Arrow data a Parquet row group holds at most (16 MiB; :func:`row_bytes`)
ROW_GROUP_BYTES = 16 << 20


def batch_table(batch: Batch, schema: pa.Schema) -> pa.Table:
    """A batch of columns as an Arrow table with the explicit schema (no type inference)."""
    return pa.Table.from_arrays([_array(batch[f.name], f.type) for f in schema], schema=schema)


def _array(column, type_: pa.DataType) -> pa.Array:
    if isinstance(column, (pa.Array, pa.ChunkedArray)):
        return column if column.type == type_ else column.cast(type_)
    return pa.array(column, type=type_)


def _pylists(batch: Batch) -> Batch:
    return {
        k: v.to_pylist() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v
        for k, v in batch.items()
    }


def write_jsonl(path: Path, batches: Iterator[Batch], schema: pa.Schema, exporter: Exporter) -> int:
    names = schema.names
    rows = 0
    dumps, record = orjson.dumps, exporter.json_record
    with path.open("wb") as f:
        for batch in batches:
            batch = _pylists(batch)
            n = len(batch[names[0]])
            # a few thousand lines a write: a batch's whole text is never one more copy in memory
            for part in range(0, n, JSONL_LINES):
                end = min(n, part + JSONL_LINES)
                f.write(b"".join(dumps(record(batch, names, i)) + b"\n" for i in range(part, end)))
            rows += n
    return rows


def row_bytes(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The bytes of Arrow data of each row of ``array``: a fixed-width value's width (a
    boolean: 1), a string's or binary's bytes and its offset, a list's offset and its
    elements', a struct's fields' (validity bits left out). Other types: their bytes spread
    evenly over their rows."""
    if isinstance(array, pa.ChunkedArray):
        parts = [row_bytes(c) for c in array.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    n, t = len(array), array.type
    if pa.types.is_struct(t):
        out = np.zeros(n, np.int64)
        for i in range(t.num_fields):
            out += row_bytes(array.field(i))
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offsets = array.offsets.to_numpy()  # into the whole child, the slice's rows only
        inner = np.concatenate(([0], np.cumsum(row_bytes(array.values))))
        return inner[offsets[1:]] - inner[offsets[:-1]] + (4 if pa.types.is_list(t) else 8)
    for is_type, width, dtype in (
        (pa.types.is_string, 4, np.int32),
        (pa.types.is_binary, 4, np.int32),
        (pa.types.is_large_string, 8, np.int64),
        (pa.types.is_large_binary, 8, np.int64),
    ):
        if is_type(t):
            buffer = array.buffers()[1]
            if buffer is None:
                return np.zeros(n, np.int64)
            offsets = np.frombuffer(buffer, dtype)[array.offset : array.offset + n + 1]
            return np.diff(offsets).astype(np.int64) + width
    if pa.types.is_null(t):
        return np.zeros(n, np.int64)
    if pa.types.is_dictionary(t):
        return np.full(n, max(1, t.index_type.bit_width // 8), np.int64)
    if t.num_buffers == 2 and not t.num_fields:  # fixed width
        try:
            return np.full(n, max(1, t.bit_width // 8), np.int64)
        except ValueError:
            pass
    return np.full(n, -(-array.nbytes // max(1, n)), np.int64)


def row_groups(
    batches: Iterable[Batch],
    schema: pa.Schema,
    rows: int | None = None,
    nbytes: int | None = None,
) -> Iterator[pa.Table]:
    """``batches`` as tables of at most ``rows`` (:data:`ROW_GROUP_ROWS`) rows and ``nbytes``
    (:data:`ROW_GROUP_BYTES`) bytes of :func:`row_bytes`, cut where the rows pass a bound
    whatever the batches were (at least one row a table), each column one contiguous array.
    Held: one group's rows as they came, and one column of it copied at a time."""
    max_rows = ROW_GROUP_ROWS if rows is None else rows
    max_bytes = ROW_GROUP_BYTES if nbytes is None else nbytes
    columns: list[list[pa.Array]] = [[] for _ in schema]  # the group's rows, column by column
    have_rows = have_bytes = 0
    for batch in batches:
        table = batch_table(batch, schema)
        if not table.num_rows:
            continue
        sizes = np.zeros(table.num_rows, np.int64)
        for column in table.columns:
            sizes += row_bytes(column)
        ends = np.cumsum(sizes)  # bytes up to and including each row
        start = 0
        while start < table.num_rows:
            base = int(ends[start - 1]) if start else 0
            fit = int(np.searchsorted(ends, base + max_bytes - have_bytes, side="right")) - start
            take = min(table.num_rows - start, max_rows - have_rows, fit)
            if take <= 0 and not have_rows:  # a row over the byte bound: a group of its own
                take = 1
            if take > 0:
                for held, column in zip(columns, table.slice(start, take).columns, strict=True):
                    held.extend(column.chunks)
                have_rows += take
                have_bytes += int(ends[start + take - 1]) - base
                start += take
            if start < table.num_rows or have_rows >= max_rows:  # a bound is reached
                group = _contiguous(columns, schema)
                have_rows, have_bytes = 0, 0
                yield group
                del group
        del table
    if have_rows:
        yield _contiguous(columns, schema)


def _contiguous(columns: list[list[pa.Array]], schema: pa.Schema) -> pa.Table:
    """One table of the held ``columns`` (emptied), each column one array as
    :func:`batch_table` builds one: a column's pieces are let go once it is copied."""
    arrays = []
    for i, pieces in enumerate(columns):
        columns[i] = []
        arrays.append(pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces))
        del pieces
    return pa.Table.from_arrays(arrays, schema=schema)


def tables_of(batches: Iterable[Batch], schema: pa.Schema, regroup: bool) -> Iterator[pa.Table]:
    """The tables a Parquet file or a ``datasets`` directory is written from: ``batches`` cut
    into :func:`row_groups`, or (``regroup`` False: the exporter cut them, e.g. at item
    boundaries) one table a batch."""
    if regroup:
        return row_groups(batches, schema)
    return (t for t in (batch_table(b, schema) for b in batches) if t.num_rows)


def write_parquet(
    path: Path, batches: Iterable[Batch], schema: pa.Schema, *, regroup: bool = True
) -> int:
    """zstd-compressed, one row group a table of :func:`tables_of`, written as it comes; an
    empty export is a valid empty file."""
    rows = 0
    with pq.ParquetWriter(path, schema, compression=PARQUET_COMPRESSION) as writer:
        for table in tables_of(batches, schema, regroup):
            writer.write_table(table, row_group_size=table.num_rows)
            rows += table.num_rows
            del table
    return rows


def write_data(
    exporter: Exporter, data: ExportData, options: ExportOptions, directory: Path
) -> dict[str, int]:
    """Write the exporter's rows into ``directory``; ``{relative file: rows}`` of data files."""
    with gc_paused():
        return _write_data(exporter, data, options, directory)


def _write_data(
    exporter: Exporter, data: ExportData, options: ExportOptions, directory: Path
) -> dict[str, int]:
    schema = exporter.schema(data, options)
    batches = exporter.batches(data, options)
    if options.file_format == "jsonl":
        name = f"{options.split}.jsonl"
        return {name: write_jsonl(directory / name, batches, schema, exporter)}
    if options.file_format == "parquet":
        name = f"{options.split}.parquet"
        return {name: write_parquet(directory / name, batches, schema, regroup=exporter.recut)}
    if options.file_format == "hf":
        tables = tables_of(batches, schema, exporter.recut)
        return {options.split: hf_writer.write_hf(directory, tables, schema, options.split)}
    raise ExportError(f"unknown file format {options.file_format!r}; choose jsonl, parquet or hf")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def file_hashes(
    directory: Path, skip: tuple[str, ...] = (MANIFEST,)
) -> dict[str, dict[str, int | str]]:
    """``{relative path: {sha256, bytes}}`` of every file under ``directory`` (sorted)."""
    out: dict[str, dict[str, int | str]] = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        if rel in skip:
            continue
        out[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return out


class AtomicDir:
    """A directory that appears at ``target`` complete or not at all.

    ``tmp`` is filled by the caller; :meth:`publish` swaps it in (keeping any previous export
    aside until :meth:`finish`); :meth:`abort` undoes everything.
    """

    def __init__(self, target: Path) -> None:
        self.target = Path(target).expanduser().absolute()
        if self.target.exists():
            if not self.target.is_dir():
                raise ExportError(
                    f"{self.target} exists and is not a directory; choose a directory for --out"
                )
            if any(self.target.iterdir()) and not (self.target / MANIFEST).is_file():
                raise ExportError(
                    f"{self.target} is a non-empty directory that is not a preflab export; "
                    "choose a new or empty directory for --out"
                )
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(
            tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-", dir=self.target.parent)
        )
        self.old: Path | None = None
        self.published = False

    def publish(self) -> None:
        if self.target.exists():
            self.old = self.target.parent / f".{self.target.name}.old-{uuid.uuid4().hex[:8]}"
            self.target.rename(self.old)
        self.tmp.rename(self.target)
        self.published = True

    def abort(self) -> None:
        if self.published:
            self.target.rename(self.tmp)
            if self.old is not None:
                self.old.rename(self.target)
            self.published = False
        shutil.rmtree(self.tmp, ignore_errors=True)

    def finish(self) -> None:
        if self.old is not None:
            shutil.rmtree(self.old, ignore_errors=True)
