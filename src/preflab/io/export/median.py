"""Exact medians of float values on disk, in bounded memory.

A streamed export's length gate reports each cohort's median length ratio (:mod:`.length_gate`);
past :data:`~.spill.MEMORY_VALUES` pairs the ratios go to a file per cohort (:class:`FloatFile`).
:func:`file_median` returns what :func:`statistics.median` returns for the file's values (the
middle value of the sorted values, or the mean of the two middle ones, ``(a + b) / 2``): with
no more than ``memory`` of them, from the values read and sorted; else each order statistic it
needs is selected exactly by radix selection on the floats' bits: a pass counts the values per
16-bit digit (65,536 counters) among those that share the digits chosen so far, the digit
holding the wanted rank is chosen, and once no more than ``memory`` values share the chosen
digits, a last pass reads them and sorts them (at most four counting passes: 64 bits). The
file is read :data:`READ_BLOCK` values at a time.

The values must not be NaN (no order) and should not mix ``0.0`` with ``-0.0`` (equal to
``statistics.median``, distinct here); a length ratio is neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .spill import Spill, memory_values

_SIGN = np.uint64(1 << 63)
_DIGIT = 16
#: values read from a file at a time (512 KB)
READ_BLOCK = 1 << 16


class FloatFile:
    """float64 values appended to a file of ``spill`` (made on the first append)."""

    def __init__(self, spill: Spill, stem: str) -> None:
        self.spill, self.stem = spill, stem
        self.path: Path | None = None
        self.n = 0

    def append(self, values: np.ndarray) -> None:
        if not len(values):
            return
        if self.path is None:
            self.path = self.spill.file(self.stem)
        with self.path.open("ab") as f:
            np.ascontiguousarray(values, dtype=np.float64).tofile(f)
        self.n += len(values)

    def median(self, memory: int | None = None) -> float | None:
        """``statistics.median`` of the values; None when there is none."""
        if self.path is None:
            return None
        return file_median(self.path, self.n, memory)


def _blocks(path: Path, memory: int) -> Iterator[np.ndarray]:
    with path.open("rb") as f:
        while True:
            block = np.fromfile(f, dtype=np.float64, count=min(memory, READ_BLOCK))
            if not len(block):
                return
            yield block


def _keys(values: np.ndarray) -> np.ndarray:
    """Unsigned integers in the order of the floats (sign bit flipped; negatives: every bit)."""
    bits = values.view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _value(key: int) -> float:
    bits = key ^ (1 << 63) if key >> 63 else ~key & (1 << 64) - 1
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def kth(path: Path, k: int, memory: int | None = None) -> float:
    """The ``k``-th smallest (from 0) of the file's values, reading ``memory`` values at a
    time and holding no more than ``memory`` besides 65,536 counters."""
    memory = memory_values(memory)
    chosen, shift = 0, 64  # the top 64 - shift bits of the wanted key are ``chosen``
    while shift:
        shift -= _DIGIT
        counts = np.zeros(1 << _DIGIT, dtype=np.int64)
        for block in _blocks(path, memory):
            keys = _keys(block)
            if shift + _DIGIT < 64:
                keys = keys[keys >> np.uint64(shift + _DIGIT) == np.uint64(chosen)]
            digits = (keys >> np.uint64(shift)) & np.uint64((1 << _DIGIT) - 1)
            counts += np.bincount(digits.astype(np.int64), minlength=1 << _DIGIT)
        below = np.cumsum(counts)
        digit = int(np.searchsorted(below, k, side="right"))
        k -= int(below[digit - 1]) if digit else 0
        chosen = chosen << _DIGIT | digit
        if counts[digit] <= memory and shift:
            return _kth_among(path, chosen, shift, k, memory)
    return _value(chosen)  # every bit chosen: the value itself


def _kth_among(path: Path, chosen: int, shift: int, k: int, memory: int) -> float:
    """The ``k``-th smallest of the values whose keys start with ``chosen`` (few enough)."""
    found = [
        block[_keys(block) >> np.uint64(shift) == np.uint64(chosen)]
        for block in _blocks(path, memory)
    ]
    return float(np.sort(np.concatenate(found), kind="stable")[k])


def file_median(path: Path, n: int, memory: int | None = None) -> float | None:
    """``statistics.median`` of the ``n`` float64 values in ``path``, exactly, in bounded
    memory; None when ``n`` is 0."""
    if n == 0:
        return None
    if n <= memory_values(memory):
        return sorted_median(np.fromfile(path, dtype=np.float64, count=n))
    middle = n // 2
    if n % 2:
        return kth(path, middle, memory)
    return (kth(path, middle - 1, memory) + kth(path, middle, memory)) / 2


def sorted_median(values: np.ndarray) -> float | None:
    """``statistics.median`` of ``values`` (held in memory), from a sorted copy; None when
    there is none."""
    n = len(values)
    if not n:
        return None
    ordered, middle = np.sort(values), n // 2
    if n % 2:
        return float(ordered[middle])
    return (float(ordered[middle - 1]) + float(ordered[middle])) / 2
