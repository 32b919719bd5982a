"""Records in chunks, converted here or by a second process for large files (its protocol).

The converting process is ``python -m preflab.io.convert_worker``; it sends each chunk of
converted records over a pipe as one length-prefixed message (:func:`encode_chunk`). For a
SQLite import it stages the plain comparisons' rows in a SQLite image instead of sending them
(:mod:`.stage`), so the writer moves them with ``INSERT ... SELECT``.
"""

from __future__ import annotations

import gc
import marshal
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import IO, Any, BinaryIO

from ...settings import get_settings
from ...store.rows import PairRows
from .convert import Pair, Record, records
from .options import ImportOptions
from .stage import Stage, StagedRows, WrittenKeys, stage_pairs

#: Records per database round (lookups + inserts), and per message from the converting process.
CHUNK = 10_000
#: The converting process's first message is smaller, so the writer starts on it sooner.
FIRST_CHUNK = 1_000
#: Records the writing process converts itself while the converting process starts: a fresh
#: interpreter importing preflab takes ~0.5 s, in which this process would otherwise wait
#: (converting and writing these here takes ~30 µs a record). The converting process reads
#: them without converting them (:func:`.convert.records`' ``skip``).
HEAD = CHUNK

#: Files at least this large (together) are read and converted by a second process while this one
#: checks and writes, when a core is free for it (:func:`idle_cores`): the two halves of an
#: import then overlap. Below the size the process start (~0.3 s) costs more than it
#: saves. ``PREFLAB_IMPORT_WORKER=0|1`` forces it off/on.
PARALLEL_MIN_BYTES = 16 * 2**20
#: Where the ``preflab`` package lives, for the child's import path.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


def use_worker(paths: Sequence[Path]) -> bool:
    forced = get_settings().import_worker
    if forced is not None:
        return forced
    try:
        if sum(p.stat().st_size for p in paths) < PARALLEL_MIN_BYTES:
            return False
    except OSError:
        return False  # the reader reports missing files with their path
    # A core to spare? Without one the two processes take turns on the same cores, which
    # measured slower than converting here (11.5 s vs 8.4 s per 100k rows with another job busy).
    return idle_cores() >= 0.75


def idle_cores(window: float = 0.1) -> float:
    """Cores idle right now (over ``window`` seconds, from ``/proc/stat``), or an estimate from the
    1-minute load average where there is no ``/proc`` (it lags a burst by a minute)."""
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )

    def sample() -> tuple[int, int]:
        with open("/proc/stat", "rb") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields[:8])  # idle + iowait, all but guest time

    try:
        idle0, total0 = sample()
        time.sleep(window)
        idle1, total1 = sample()
    except (OSError, ValueError, IndexError):
        return max(0.0, cores - os.getloadavg()[0])
    machine = os.cpu_count() or cores
    idle = machine * (idle1 - idle0) / max(total1 - total0, 1)
    return min(idle, cores)


class StagedChunk:
    """A chunk of plain comparisons only, staged, that the converting process found new within
    itself (no item key, item content or judgment twice): in a project whose items this import
    wrote, the writer accepts it whole when none of its keys is stored yet, moving its rows
    without a Python object a row (:meth:`.loader.Loader.load`). :meth:`records` gives the
    records for the checks a row at a time, when it cannot."""

    __slots__ = ("stage", "size", "raters", "_keys", "_files", "_blob")

    def __init__(
        self,
        stage: Stage,
        size: int,
        raters: list[str],
        keys: bytes,
        files: list[str],
        blob: bytes,
    ) -> None:
        self.stage, self.size, self.raters = stage, size, raters
        self._keys, self._files, self._blob = keys, files, blob

    def keys(self) -> list[str]:
        """The item keys, in staged order."""
        keys: list[str] = marshal.loads(self._keys)
        return keys

    def records(self) -> list[Record | Pair]:
        return _decoded(self._files, self._blob, [], self.stage)


def encode_chunk(
    chunk: list[Record | Pair], read: int, stage: bool = False, seen: WrittenKeys | None = None
) -> bytes:
    """One message from the worker: bytes read since the last message, the plain comparisons and
    the other records pickled, each with its place in the chunk.

    The plain comparisons go as ``marshal``-ed state tuples (~2 µs a record each way; ``pickle``
    of the objects: ~28 µs), or with ``stage`` as the image of a staging database
    (:func:`.stage.stage_pairs`) plus the keys and hashes the checks read, and the item keys
    among them that ``seen`` (the keys of the records converted before) may hold; this chunk's
    keys are added to it. A staged chunk of plain comparisons that repeat nothing within it
    says so, with its raters (:class:`StagedChunk`)."""
    files: dict[str, int] = {}
    places: list[tuple[int, int, int | None]] = []
    pairs: list[PairRows] = []
    others: list[tuple[int, Record]] = []
    for i, rec in enumerate(chunk):
        if type(rec) is Pair:
            places.append((i, files.setdefault(rec.file, len(files)), rec.line))
            pairs.append(rec.rows)
        else:
            others.append((i, rec))  # type: ignore[arg-type]
    repeats: list[str] = []
    whole: tuple[int, bytes, list[str]] | None = None
    values: list[tuple[Any, ...]] | None
    if stage and pairs:
        # Only the image: the writer reads the keys and hashes back from it when it needs them.
        values, image = None, stage_pairs(pairs)
        keys = [p.item_key for p in pairs]
        if seen is not None:
            repeats = seen.maybe_then_add(keys)
            seen.add(i.key for _, rec in others for i in rec.items)
        # Distinct item keys: then distinct items and judgments too (a plain comparison's item
        # hash and judgment hash are of the content its key is derived from, key included).
        n = len(pairs)
        if not others and len(set(keys)) == n:
            whole = (n, marshal.dumps(keys), sorted({p.rater_key for p in pairs}))
    else:
        values, image = [p.state() for p in pairs], None
    return pickle.dumps(
        ("chunk", read, list(files), marshal.dumps((places, values)), others, image, repeats,
         whole),
        protocol=pickle.HIGHEST_PROTOCOL,
    )  # fmt: skip


def decode_chunk(
    files: list[str],
    pairs_blob: bytes,
    others: list[tuple[int, Record]],
    image: bytes | None,
    repeats: list[str],
    whole: tuple[int, bytes, list[str]] | None,
) -> Chunk:
    stage = None if image is None else Stage(image, repeats)
    if whole is not None and stage is not None:
        size, keys, raters = whole
        return StagedChunk(stage, size, raters, keys, files, pairs_blob)
    return _decoded(files, pairs_blob, others, stage)


def _decoded(
    files: list[str], pairs_blob: bytes, others: list[tuple[int, Record]], stage: Stage | None
) -> list[Record | Pair]:
    places, values = marshal.loads(pairs_blob)
    chunk: list[Any] = [None] * (len(places) + len(others))
    if stage is None:
        from_state = PairRows.from_state
        for (i, f, line), state in zip(places, values, strict=True):
            chunk[i] = Pair(files[f], line, from_state(state))
    else:
        for seq, ((i, f, line), light) in enumerate(zip(places, stage.light_rows(), strict=True)):
            chunk[i] = Pair(files[f], line, StagedRows(stage, seq, *light))  # type: ignore[arg-type]
    for i, rec in others:
        chunk[i] = rec
    return chunk


#: What the writer gets: records, or a staged chunk that may be accepted whole.
Chunk = list[Record | Pair] | StagedChunk


def _send(out: BinaryIO, message: bytes) -> None:
    out.write(len(message).to_bytes(8, "little"))
    out.write(message)
    out.flush()


def _receive(src: IO[bytes]) -> bytes | None:
    """One message, or ``None`` at the end of the stream (a short read: the writer is gone)."""
    head = src.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "little")
    message = src.read(size)
    return message if len(message) == size else None


def convert_worker_main(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The converting process (``python -m preflab.io.convert_worker``): reads the pickled
    ``(paths, options, stage, skip)`` from ``stdin``, writes its chunks to ``stdout`` (the first
    of :data:`FIRST_CHUNK` records), then a ``done`` (or an ``error``) message; ``skip``: records
    the parent converts itself (counted in the bytes read all the same)."""
    gc.disable()
    paths, options, stage, skip = pickle.loads(stdin.read())  # written by our own parent process
    read = 0

    def progress(n: int) -> None:
        nonlocal read
        read += n

    try:
        converted = records(paths, options, progress, skip=skip)
        size = FIRST_CHUNK
        seen = WrittenKeys() if stage else None  # (the first ``skip`` records: the writer's)
        while chunk := list(islice(converted, size)):
            size = CHUNK
            message = encode_chunk(chunk, read, stage, seen)
            read = 0
            del chunk
            _send(stdout, message)
        _send(stdout, pickle.dumps(("done", read)))
    except BrokenPipeError:
        return  # the parent stopped listening: it failed already and reports why
    except Exception as exc:  # reported to the parent, which raises it
        _send(stdout, pickle.dumps(("error", f"{type(exc).__name__}: {exc}")))


class WorkerFailed(RuntimeError):
    """The converting process stopped without finishing (the import changed nothing)."""


#: What :func:`chunks` gives: started with the import's final options (and whether to stage),
#: the chunks of converted records.
StartConverting = Callable[[ImportOptions, bool], Iterator[Chunk]]


@contextmanager
def converting_process(
    paths: Sequence[Path], progress: Callable[[int], None] | None
) -> Iterator[Callable[[ImportOptions, bool, int], Iterator[Chunk]]]:
    """A second process that converts ``paths``, started now; what this yields, called with the
    options (``stage``: its plain comparisons staged for ``INSERT ... SELECT``, :mod:`.stage`,
    SQLite only; ``skip``: it starts after that many records, converted by the caller), gives its
    chunks of converted records, in file order.

    The child is a fresh interpreter started with ``python -m preflab.io.convert_worker``:
    nothing of this process (database connections, threads, the caller's ``__main__``) is copied
    into it. It imports preflab (~0.5 s) while the caller works out the options, and then reads
    them from its stdin. Its chunks come over a pipe that holds about one of them, so it converts
    at most a chunk or two ahead of what this process has written and memory stays flat.
    """
    worker = subprocess.Popen(  # our own module, by the running interpreter
        [sys.executable, "-m", "preflab.io.convert_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])
            ),
        },
    )
    assert worker.stdin is not None and worker.stdout is not None
    finished = False

    def start(options: ImportOptions, stage: bool, skip: int) -> Iterator[Chunk]:
        assert worker.stdin is not None
        try:
            worker.stdin.write(pickle.dumps(([Path(p) for p in paths], options, stage, skip)))
            worker.stdin.close()
        except BrokenPipeError:
            pass  # it died at once: reported below by the missing messages
        return received()

    def received() -> Iterator[Chunk]:
        nonlocal finished
        assert worker.stdout is not None
        while True:
            message = _receive(worker.stdout)
            if message is None:
                code = worker.wait()
                raise WorkerFailed(
                    f"the converting process stopped with exit code {code} before the end of "
                    "the files; nothing was imported (see its message above)"
                )
            tag, *body = pickle.loads(message)  # from our own child process
            # Let go of the message before its chunk is written: it holds a copy of the chunk's
            # stage image and records (~10 MB a chunk of 10k comparisons).
            del message
            if tag == "error":
                raise WorkerFailed(f"converting the records failed: {body[0]}")
            if progress is not None and body[0]:
                progress(body[0])
            if tag == "done":
                finished = True
                return
            yield decode_chunk(*body[1:])

    try:
        yield start
    finally:
        if not finished:  # the import stopped early (failed, or the files were imported before)
            worker.kill()
        worker.stdin.close()
        worker.stdout.close()
        try:
            worker.wait(5)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


@contextmanager
def worker_chunks(
    paths: Sequence[Path],
    options: ImportOptions,
    progress: Callable[[int], None] | None,
    stage: bool = False,
    skip: int = 0,
) -> Iterator[Iterator[Chunk]]:
    """The chunks of a :func:`converting_process` started with ``options``."""
    with converting_process(paths, progress) as start:
        yield start(options, stage, skip)


@contextmanager
def chunks(
    paths: Sequence[Path], progress: Callable[[int], None] | None
) -> Iterator[StartConverting]:
    """The converted records in chunks of ``CHUNK``, once started with the import's options
    (:data:`StartConverting`): from a second process for large imports (:func:`use_worker`),
    else converted here.

    The second process starts on entry, so that its interpreter starts while the caller prepares
    (hashes the files, opens the transaction, reads the project's options), and its first
    :data:`HEAD` records are converted here while it starts."""
    if not use_worker(paths):

        def here(options: ImportOptions, stage: bool) -> Iterator[Chunk]:
            converted = records(paths, options, progress)
            return iter(lambda: list(islice(converted, CHUNK)), [])

        yield here
        return
    with converting_process(paths, progress) as start:

        def there(options: ImportOptions, stage: bool) -> Iterator[Chunk]:
            return _head_then(records(paths, options, None), start(options, stage, HEAD))

        yield there


def _head_then(
    converted: Generator[Record | Pair, None, None], rest: Iterator[Chunk]
) -> Iterator[Chunk]:
    """The first :data:`HEAD` records of ``converted`` in chunks of :data:`FIRST_CHUNK` (small:
    what they leave behind in this process's heap stays small), then the chunks of ``rest``.
    (No progress for the head: the converting process counts its bytes when it reads past them.)"""
    head = islice(converted, HEAD)
    while chunk := list(islice(head, FIRST_CHUNK)):
        yield chunk
    converted.close()  # (its file)
    yield from rest
