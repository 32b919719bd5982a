"""Pass 1's rows kept on disk for pass 2, so a streamed export reads the project once.

A two-pass export (:mod:`.stream`) decides the file's schema only once every chunk is read
(chat or text columns, ``margin``, ``source``); its pass 2 read, resolved and gated every chunk
again to build the rows. For a format that can build a chunk's rows in pass 1 with every
column the whole export may name (:meth:`~.base.Exporter.chunk_rows`: the pair formats),
:class:`RowCache` writes them as they come to an Arrow IPC stream in the export's private
temporary directory (:class:`~.spill.Spill`, removed when the export ends), its side files
beside it, and pass 2 reads them back a record batch at a time, keeping the columns the
schema names: the same arrays, hence the same bytes, without a second read of the project.

When a chunk's rows cannot serve (a later chunk turned the export conversational, or its
label sources added the ``source`` column that earlier chunks lack: the batches' schemas
differ), :meth:`RowCache.usable` says no and pass 2 reads the project again, as before.
Memory: one chunk's batches while they are written, one record batch while read back (read
into memory, not mapped: mapped pages would count in the process's resident set).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from .base import Batch, ExportData, Exporter, ExportOptions
from .spill import Spill


class RowCache:
    """The chunks' rows of ``exporter`` as pass 1 built them (see the module docstring)."""

    def __init__(self, exporter: Exporter, options: ExportOptions, spill: Spill) -> None:
        self.exporter, self.options, self.spill = exporter, options, spill
        self.ok = True
        self.schema: pa.Schema | None = None
        self.path: Path | None = None
        self._sink: Any = None
        self._writer: Any = None
        #: the ``conversational`` flags the chunks' rows were built with
        self.conversational: set[bool] = set()
        #: per chunk: its items and its record batches
        self.chunks: list[tuple[int, int]] = []
        self.side: dict[str, Path] = {}

    def add(self, data: ExportData, items: int) -> None:
        """Build and write ``data``'s rows (a chunk of ``items`` items, gated by pass 1)."""
        if not self.ok:
            return
        batches = self.exporter.chunk_rows(data, self.options)
        if batches is None:
            self.abandon()
            return
        self.conversational.add(data.conversational)
        n = 0
        for batch in batches:
            record = pa.record_batch(list(batch.values()), names=list(batch))
            if self._writer is None:
                self.schema = record.schema
                self.path = self.spill.file("rows.arrow")
                self._sink = pa.OSFile(str(self.path), "wb")
                self._writer = pa.ipc.new_stream(self._sink, record.schema)
            elif not record.schema.equals(self.schema):
                self.abandon()
                return
            self._writer.write_batch(record)
            n += 1
        self.chunks.append((items, n))
        for name, content in self.exporter.side_files(data, self.options).items():
            if name not in self.side:
                self.side[name] = self.spill.file(f"side.{len(self.side)}")
            with self.side[name].open("ab") as f:
                f.write(content)

    def abandon(self) -> None:
        """Keep no more: pass 2 reads the project again."""
        self.ok = False
        self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def usable(self, summary: ExportData) -> bool:
        """Whether every chunk's rows are those of ``summary``'s schema: the same
        ``conversational`` and every column the schema names, of its type."""
        self.close()
        if not self.ok or not self.conversational <= {summary.conversational}:
            return False
        if self.schema is None:  # no rows at all
            return True
        for f in self.exporter.schema(summary, self.options):
            index = self.schema.get_field_index(f.name)
            if index < 0 or not self.schema.field(index).type.equals(f.type):
                return False
        return True

    def copy_side_files(self, directory: Path, names: list[str]) -> None:
        """The side files ``names`` as the chunks appended them (empty when no chunk did)."""
        for name in names:
            path = self.side.get(name)
            if path is None:
                (directory / name).write_bytes(b"")
            else:
                shutil.copyfile(path, directory / name)

    def read(self, names: list[str]) -> Iterator[tuple[int, list[Batch]]]:
        """Per chunk, its items and its batches with the columns ``names``, in order."""
        if self.path is None:
            for items, _ in self.chunks:
                yield items, []
            return
        # read, not memory-mapped: a mapped file's pages touched count in the process's RSS
        with pa.OSFile(str(self.path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            for items, n in self.chunks:
                batches: list[Batch] = []
                for _ in range(n):
                    record = reader.read_next_batch()
                    batches.append({name: record.column(name) for name in names})
                yield items, batches
