"""What a streamed export keeps per pair, in memory that does not grow with the export.

Pass 1 of a streamed export (:mod:`.stream`) decides every pair's length verdict and margin;
pass 2 replays them in the same order. :class:`Tape` keeps such values in memory up to
:data:`MEMORY_VALUES` of them; past that, each full buffer is appended to a file in a private
temporary directory (:class:`Spill`) and read back, a buffer at a time, in the order written.
A small export never touches the disk: the directory is made only when a first buffer spills,
and removed by :meth:`Spill.close` (the exporter calls it in a ``finally``, on errors and
cancels too). The directory lies beside the export's output (``.NAME.tmp-spill-*``), where
the web app's :func:`~preflab.server.export_jobs.remove_partial` also looks after a job whose
process was killed.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Generator, Iterable
from pathlib import Path

#: values of one kind held in memory before they go to disk (2 MB of floats): reached by
#: ~260,000 pairs, so an export's memory is flat from there; the files cost a write and a read
#: of ~25 bytes a pair
MEMORY_VALUES = 262_144


def memory_values(memory: int | None) -> int:
    """``memory``, else :data:`MEMORY_VALUES` as it is now (tests make it tiny); at least 1."""
    return max(1, MEMORY_VALUES if memory is None else memory)


class Spill:
    """A private temporary directory beside ``near`` (else the system's), made on first use."""

    def __init__(self, near: str | Path | None = None) -> None:
        self.near = None if near is None else Path(near).expanduser().absolute()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._names = 0

    def file(self, stem: str) -> Path:
        """A new file's path in the directory (made now if it is not there yet)."""
        if self._dir is None:
            if self.near is None:
                self._dir = tempfile.TemporaryDirectory(prefix="preflab-spill-")
            else:
                self.near.parent.mkdir(parents=True, exist_ok=True)
                self._dir = tempfile.TemporaryDirectory(
                    prefix=f".{self.near.name}.tmp-spill-", dir=self.near.parent
                )
        self._names += 1
        return Path(self._dir.name) / f"{self._names}-{stem}"

    @property
    def used(self) -> bool:
        return self._dir is not None

    def close(self) -> None:
        """Remove the directory and its files (nothing to do when it was never made)."""
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Tape:
    """Values of one :mod:`array` type code, appended in order and read back in that order.

    Up to ``memory`` values stay in memory; then the buffer is appended to a file of ``spill``
    (without one, everything stays in memory: the in-memory export holds every pair anyway).
    """

    def __init__(
        self, typecode: str, spill: Spill | None = None, memory: int | None = None
    ) -> None:
        self.typecode, self.spill = typecode, spill
        self.memory = memory_values(memory)
        self.buffer = array(typecode)
        self.path: Path | None = None
        self.on_disk = 0

    def extend(self, values: Iterable[float | int]) -> None:
        self.buffer.extend(values)  # type: ignore[arg-type]
        if len(self.buffer) >= self.memory and self.spill is not None:
            if self.path is None:
                self.path = self.spill.file(f"tape.{self.typecode}")
            with self.path.open("ab") as f:
                self.buffer.tofile(f)
            self.on_disk += len(self.buffer)
            self.buffer = array(self.typecode)

    def __len__(self) -> int:
        return self.on_disk + len(self.buffer)

    def blocks(self) -> Generator[array]:
        """The values in order: the file's, ``memory`` of them at a time, then the buffer's."""
        if self.path is not None:
            with self.path.open("rb") as f:
                left = self.on_disk
                while left:
                    block = array(self.typecode)
                    block.fromfile(f, min(self.memory, left))
                    left -= len(block)
                    yield block
        yield self.buffer

    def reader(self) -> TapeReader:
        return TapeReader(self)


class TapeReader:
    """A :class:`Tape`'s values from the first, ``take(n)`` at a time."""

    def __init__(self, tape: Tape) -> None:
        self.typecode = tape.typecode
        self.blocks = tape.blocks()
        self.block = array(tape.typecode)
        self.at = 0

    def take(self, n: int) -> array:
        """The next ``n`` values."""
        out = array(self.typecode)
        while len(out) < n:
            if self.at >= len(self.block):
                block = next(self.blocks, None)
                if block is None:
                    raise IndexError("read past the end of a tape")
                self.block, self.at = block, 0
            step = min(n - len(out), len(self.block) - self.at)
            out.extend(self.block[self.at : self.at + step])
            self.at += step
        return out

    def close(self) -> None:
        self.blocks.close()
