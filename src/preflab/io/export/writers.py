"""Writers: JSONL, Parquet and Hugging Face ``datasets`` directories (:mod:`.hf_writer`),
written atomically.

Every export is built in a temporary directory beside the target and renamed into place only
when every file, the manifest and the card are written; on any error the temporary directory
is removed, so a failed export leaves nothing behind (and an older export at the same path is
kept). Replacing an older export swaps directories, then deletes the old one.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ..gc_pause import gc_paused
from . import hf_writer
from .base import Batch, ExportData, Exporter, ExportError, ExportOptions

PARQUET_COMPRESSION = "zstd"
MANIFEST = "manifest.json"
CARD = "README.md"
#: JSONL lines encoded and written at a time
JSONL_LINES = 4_096


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


def write_parquet(path: Path, batches: Iterator[Batch], schema: pa.Schema) -> int:
    """One row group per batch, zstd-compressed; an empty export is a valid empty file."""
    rows = 0
    with pq.ParquetWriter(path, schema, compression=PARQUET_COMPRESSION) as writer:
        for batch in batches:
            table = batch_table(batch, schema)
            if table.num_rows:
                writer.write_table(table, row_group_size=table.num_rows)
            rows += table.num_rows
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
        return {name: write_parquet(directory / name, batches, schema)}
    if options.file_format == "hf":
        tables = (batch_table(b, schema) for b in batches)
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
