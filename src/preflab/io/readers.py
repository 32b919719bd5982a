"""Stream records out of JSONL, JSON arrays and Parquet files (each optionally ``.gz``).

:func:`read_records` yields ``(line, record)`` where ``record`` is a dict, or a
:class:`ReadProblem` saying what is wrong with that line; it never raises for bad content.

- **JSONL** (``.jsonl``, ``.ndjson``): one object per line, constant memory. A line longer than
  ``max_line_bytes`` (default 64 MiB) is reported and skipped without being held in memory.
  Blank lines are ignored; a UTF-8 byte order mark is dropped; bytes that are not UTF-8 are
  reported with the line and the byte offset in the (decompressed) file.
- **JSON** (``.json``): an array of objects, parsed whole (the one format that is not streamed);
  the ``line`` reported for an element is the line its first character is on. A ``.json`` file
  that holds one object per line is read as JSONL.
- **Parquet** (``.parquet``): read in record batches, constant memory; ``line`` is the 1-based
  row number. ``.parquet.gz`` is decompressed to a temporary file first (Parquet needs seeks).

Files with another suffix are sniffed: ``PAR1`` magic is Parquet, a leading ``[`` a JSON array,
anything else JSONL.
"""

from __future__ import annotations

import gzip
import io
import re
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

DEFAULT_MAX_LINE_BYTES = 64 * 2**20
BOM = b"\xef\xbb\xbf"
_PROGRESS_EVERY = 1 << 20

Progress = Callable[[int], None]


@dataclass(frozen=True)
class ReadProblem:
    """A line that could not be read as a record. ``line`` is ``None`` for file-level problems."""

    line: int | None
    field: str
    reason: str


ReadResult = tuple[int | None, "dict[str, Any] | ReadProblem"]


def container_of(path: Path) -> tuple[str, bool]:
    """``(container, gzipped)`` of a file: container is ``jsonl``, ``json`` or ``parquet``."""
    name = path.name.lower()
    gz = name.endswith(".gz")
    if gz:
        name = name[:-3]
    for suffix, container in (
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "json"),
        (".parquet", "parquet"),
    ):
        if name.endswith(suffix):
            return container, gz
    return _sniff(path, gz), gz


def _sniff(path: Path, gz: bool) -> str:
    try:
        with _open_binary(path, gz) as f:
            head = f.read(4096)
    except (OSError, EOFError, zlib.error):
        return "jsonl"
    if head.startswith(b"PAR1"):
        return "parquet"
    stripped = head.removeprefix(BOM).lstrip()
    return "json" if stripped.startswith(b"[") else "jsonl"


def _open_binary(path: Path, gz: bool) -> BinaryIO:
    raw = open(path, "rb")  # closed by the caller's context
    if gz:
        return io.BufferedReader(gzip.GzipFile(fileobj=raw, mode="rb"), buffer_size=1 << 20)
    return raw


class _ProgressTracker:
    """Reports bytes of the file on disk consumed (compressed bytes for ``.gz``)."""

    def __init__(self, raw: BinaryIO, total: int, progress: Progress | None) -> None:
        self.raw, self.total, self.progress = raw, total, progress
        self.reported = 0

    def update(self) -> None:
        if self.progress is None:
            return
        try:
            pos = self.raw.tell()
        except (OSError, ValueError):
            return
        if pos - self.reported >= _PROGRESS_EVERY:
            self.progress(pos - self.reported)
            self.reported = pos

    def finish(self) -> None:
        if self.progress is not None and self.total > self.reported:
            self.progress(self.total - self.reported)
            self.reported = self.total


def read_records(
    path: str | Path,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    progress: Progress | None = None,
) -> Iterator[ReadResult]:
    """Yield ``(line, dict | ReadProblem)`` for every record of a file; see the module doc."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        yield None, ReadProblem(None, "(file)", f"cannot read: {exc.strerror or exc}")
        return
    container, gz = container_of(path)
    reader = {"jsonl": _read_jsonl, "json": _read_json_array, "parquet": _read_parquet}[container]
    seen = False
    try:
        for result in reader(path, gz, size, max_line_bytes, progress):
            seen = True
            yield result
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        yield None, ReadProblem(None, "(file)", f"cannot read {'gzip ' if gz else ''}data: {exc}")
        return
    if not seen:
        yield (
            None,
            ReadProblem(
                None,
                "(file)",
                "empty file: no records found; check that this is the file you meant",
            ),
        )


# -- JSONL ---------------------------------------------------------------------------------


def _decode_problem(
    line: bytes, exc: orjson.JSONDecodeError, line_no: int, offset: int
) -> ReadProblem:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return ReadProblem(
            line_no,
            "(line)",
            f"not valid UTF-8: byte 0x{line[bad.start]:02x} at column {bad.start + 1} "
            f"(byte offset {offset + bad.start} in the file); re-encode the file as UTF-8",
        )
    return ReadProblem(
        line_no,
        "(line)",
        f"invalid JSON: {exc.msg} at column {exc.colno}; each line must be one JSON object",
    )


def _not_an_object(value: Any, line_no: int | None, what: str) -> ReadProblem:
    kind = {
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), "null" if value is None else type(value).__name__)
    return ReadProblem(line_no, "(record)", f"expected a JSON object, got {kind}; {what}")


def _read_jsonl(
    path: Path, gz: bool, size: int, max_line_bytes: int, progress: Progress | None
) -> Iterator[ReadResult]:
    with open(path, "rb") as raw:
        f: BinaryIO = (
            io.BufferedReader(gzip.GzipFile(fileobj=raw, mode="rb"), buffer_size=1 << 20)
            if gz
            else raw
        )
        tracker = _ProgressTracker(raw, size, progress)
        line_no = 0
        offset = 0
        since_report = 0
        while True:
            line = f.readline(max_line_bytes + 1)
            if not line:
                break
            line_no += 1
            start = offset
            offset += len(line)
            since_report += len(line)
            if since_report >= _PROGRESS_EVERY:
                tracker.update()
                since_report = 0
            if len(line) > max_line_bytes and not line.endswith(b"\n"):
                while True:  # skip the rest of the line without holding it
                    rest = f.readline(1 << 20)
                    offset += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                yield (
                    line_no,
                    ReadProblem(
                        line_no,
                        "(line)",
                        f"line is {offset - start:,} bytes, over the limit of {max_line_bytes:,}; "
                        "raise the limit (--max-line-bytes) or split the record",
                    ),
                )
                continue
            if line_no == 1:
                if line.startswith((b"\xff\xfe", b"\xfe\xff")):
                    yield (
                        1,
                        ReadProblem(1, "(file)", "the file is UTF-16 encoded; convert it to UTF-8"),
                    )
                    return
                if line.startswith(BOM):
                    line = line[len(BOM) :]
                    start += len(BOM)
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                yield line_no, _decode_problem(line, exc, line_no, start)
                continue
            if isinstance(value, dict):
                yield line_no, value
            else:
                yield line_no, _not_an_object(value, line_no, "JSONL holds one object per line")
        tracker.finish()


# -- JSON arrays ---------------------------------------------------------------------------

#: Strings (which cannot hold a raw newline in JSON) and the structural characters.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.S)
_SPACE = re.compile(rb"[ \t\r\n]*")


def element_lines(data: bytes) -> list[int]:
    """1-based line of the first character of every element of a top-level JSON array."""
    starts: list[int] = []
    depth = 0
    for m in _TOKEN.finditer(data):
        c = data[m.start()]
        if c == 0x22:  # a string
            continue
        if c in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth == 1 and c == 0x5B:
                pos = _SPACE.match(data, m.end()).end()  # type: ignore[union-attr]
                if pos < len(data) and data[pos] != 0x5D:
                    starts.append(pos)
        elif c in (0x5D, 0x7D):  # ] }
            depth -= 1
        elif depth == 1:  # a comma between elements
            starts.append(_SPACE.match(data, m.end()).end())  # type: ignore[union-attr]
    lines, line, last = [], 1, 0
    for pos in starts:
        line += data.count(b"\n", last, pos)
        last = pos
        lines.append(line)
    return lines


#: bytes read at a time by the streaming array reader
_ARRAY_BLOCK = 4 << 20


def _read_json_array(
    path: Path, gz: bool, size: int, max_line_bytes: int, progress: Progress | None
) -> Iterator[ReadResult]:
    """A ``.json`` file: a top-level array is streamed element by element (issue 31: a 128 MiB
    array was parsed whole); anything else (one object, JSONL under a ``.json`` name, UTF-16)
    is read whole as before."""
    with _open_binary(path, gz) as f:
        head = f.read(4096)
    if head.removeprefix(BOM).lstrip().startswith(b"["):
        yield from _stream_json_array(path, gz, size, progress)
        return
    yield from _read_json_whole(path, gz, size, max_line_bytes, progress)


def _stream_json_array(
    path: Path, gz: bool, size: int, progress: Progress | None
) -> Iterator[ReadResult]:
    """Elements of a top-level JSON array, each with the line it starts on, in memory of one
    block plus one element. The scanner stops at the block's last newline: a JSON string never
    holds a raw newline, so no string is ever cut between two blocks. An element that is not
    valid JSON, or an array that never ends, is one problem with its line, and reading stops."""
    with open(path, "rb") as raw:
        f: BinaryIO = (
            io.BufferedReader(gzip.GzipFile(fileobj=raw, mode="rb"), buffer_size=1 << 20)
            if gz
            else raw
        )
        tracker = _ProgressTracker(raw, size, progress)
        buf = f.read(_ARRAY_BLOCK)
        eof = not buf
        buf = buf.removeprefix(BOM)
        dropped = 0  # bytes of the file before buf[0]
        line_base = 1  # the line buf[0] is on
        pos = buf.index(b"[") + 1
        start = pos  # where the current element begins (after "[" or ",")
        depth = 1
        commas = 0
        while True:
            limit = len(buf) if eof else buf.rfind(b"\n", pos) + 1
            for m in _TOKEN.finditer(buf, pos, limit) if limit > pos else ():
                c = buf[m.start()]
                if c == 0x22:  # a string
                    continue
                if c in (0x5B, 0x7B):  # [ {
                    depth += 1
                    continue
                if c in (0x5D, 0x7D):  # ] }
                    depth -= 1
                    if depth:
                        continue
                    # the array's end: its last element, then only white space may follow
                    text = buf[start : m.start()]
                    if text.strip() or commas:  # "[]" has no element; "[1, ]" an empty one
                        yield _array_element(text, buf, start, line_base, dropped)
                    tail = buf[m.end() :] + (b"" if eof else f.read())
                    if tail.strip():
                        line = line_base + buf.count(b"\n", 0, m.end())
                        yield (
                            line,
                            ReadProblem(line, "(file)", "invalid JSON: data after the array's end"),
                        )
                    tracker.finish()
                    return
                if depth == 1:  # a comma between two elements
                    commas += 1
                    result = _array_element(buf[start : m.start()], buf, start, line_base, dropped)
                    yield result
                    if isinstance(result[1], ReadProblem) and result[1].field == "(file)":
                        return  # not JSON: the structure after it cannot be trusted
                    start = m.end()
            pos = max(limit, pos)
            if eof:
                line = line_base + buf.count(b"\n", 0, start)
                yield (
                    line,
                    ReadProblem(
                        line, "(file)", "invalid JSON: the array does not end (a missing ']'?)"
                    ),
                )
                return
            # keep the current element's bytes only; the lines before it are counted
            line_base += buf.count(b"\n", 0, start)
            dropped += start
            buf, pos, start = buf[start:], pos - start, 0
            more = f.read(_ARRAY_BLOCK)
            tracker.update()
            if more:
                buf += more
            else:
                eof = True


def _array_element(text: bytes, buf: bytes, start: int, line_base: int, dropped: int) -> ReadResult:
    """One element's text (``buf[start:...]``) parsed, with the line its first character is on."""
    body = text.lstrip()
    first = start + len(text) - len(body)
    line = line_base + buf.count(b"\n", 0, first)
    if not body.strip():
        return line, ReadProblem(line, "(file)", "invalid JSON: an empty element (two commas?)")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as bad:
            return line, ReadProblem(
                line,
                "(file)",
                f"not valid UTF-8: byte 0x{body[bad.start]:02x} at byte offset "
                f"{dropped + first + bad.start}; re-encode the file as UTF-8",
            )
        at = line + exc.lineno - 1
        return at, ReadProblem(
            at, "(file)", f"invalid JSON: {exc.msg} at line {at} column {exc.colno}"
        )
    if isinstance(value, dict):
        return line, value
    return line, _not_an_object(value, line, "a JSON array of records holds objects")


def _read_json_whole(
    path: Path, gz: bool, size: int, max_line_bytes: int, progress: Progress | None
) -> Iterator[ReadResult]:
    with _open_binary(path, gz) as f:
        data = f.read()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        yield None, ReadProblem(None, "(file)", "the file is UTF-16 encoded; convert it to UTF-8")
        return
    data = data.removeprefix(BOM)
    if not data.strip():
        return
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if data.lstrip().startswith(b"{"):  # one object per line under a .json name
            yield from _read_jsonl(path, gz, size, max_line_bytes, progress)
            return
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            yield (
                line,
                ReadProblem(
                    line,
                    "(line)",
                    f"not valid UTF-8: byte 0x{data[bad.start]:02x} at byte offset {bad.start}; "
                    "re-encode the file as UTF-8",
                ),
            )
            return
        yield (
            exc.lineno,
            ReadProblem(
                exc.lineno,
                "(file)",
                f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            ),
        )
        return
    if progress is not None:
        progress(size)
    if isinstance(value, dict):
        yield 1, value
        return
    if not isinstance(value, list):
        yield 1, _not_an_object(value, 1, "a .json file holds an array of objects (or use JSONL)")
        return
    lines = element_lines(data)
    if len(lines) != len(value):  # cannot happen for valid JSON; fall back to element numbers
        lines = list(range(1, len(value) + 1))
    del data
    for line, element in zip(lines, value, strict=True):
        if isinstance(element, dict):
            yield line, element
        else:
            yield line, _not_an_object(element, line, "a JSON array of records holds objects")


# -- Parquet -------------------------------------------------------------------------------


def _read_parquet(
    path: Path, gz: bool, size: int, max_line_bytes: int, progress: Progress | None
) -> Iterator[ReadResult]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = None
    try:
        source: Any = path
        if gz:
            tmp = tempfile.NamedTemporaryFile(suffix=".parquet", delete=False)
            with gzip.open(path, "rb") as src:
                shutil.copyfileobj(src, tmp, 1 << 20)
            tmp.close()
            source = tmp.name
        try:
            pf = pq.ParquetFile(source)
        except (pa.ArrowException, OSError) as exc:
            yield None, ReadProblem(None, "(file)", f"not a readable Parquet file: {exc}")
            return
        total_rows = max(pf.metadata.num_rows, 1)
        row = 0
        reported = 0
        for batch in pf.iter_batches(batch_size=2048):
            for record in batch.to_pylist():
                row += 1
                yield row, record
            if progress is not None:
                done = size * row // total_rows
                progress(done - reported)
                reported = done
        if progress is not None and size > reported:
            progress(size - reported)
    finally:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)
