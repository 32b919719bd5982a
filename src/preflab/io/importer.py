"""Import records into a project: streamed, validated, all-or-nothing, idempotent.

>>> report = import_files(engine, "demo", [Path("to_label.jsonl")])      # doctest: +SKIP
>>> report.items_added, report.judgments_added                           # doctest: +SKIP

How it works:

1. The files' bytes are hashed (SHA-256). A project that already has an import batch with that
   hash has seen these files: nothing is read, ``already_imported=True``.
2. Records are streamed (:mod:`preflab.io.readers`), each converted by the first record format
   that recognises it (:mod:`preflab.io.formats`) into item and judgment rows
   (:mod:`preflab.store.rows`).
3. Every ``CHUNK`` records, existing items, judgments and raters are looked up with ``IN``
   queries, each record is checked (conflicting item ids, unknown items or candidates, judgment
   kinds the project does not collect, rubric scores), and the accepted rows are written with
   ``executemany``.
4. Everything happens in one transaction. Any problem fails the whole import and changes nothing
   (:class:`ImportFailed` lists ``file:line: field: reason``), unless ``skip_invalid``: then bad
   records are left out and listed in the report and in the batch's ``counts``.

Identity: an item is its ``id``, derived when the record has none from its prompt and the *set* of
its answers after the normalisation of :mod:`preflab.schema.identity` (NFC, surrounding
whitespace, one-message chats = their text), so the same pair written in any shape or judged in
either direction is one item. The same id with the same (normalised) content is counted as
existing, with different content it is a problem. A record with another id but the content of an
item already known joins that item, its id kept as an alias (``item_aliases``) that later
records and judgments may name (:func:`_joined_item`). A judgment is its content hash (or its
idempotency key): importing it again adds nothing.

Raises :class:`preflab.store.repo.NotFound` when the project does not exist.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import marshal
import os
import pickle
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from pydantic import ValidationError
from sqlalchemy import Connection, Table, func, insert, select, text, update

from ..schema import Rubric, rater_hash
from ..store import repo
from ..store.db import transaction
from ..store.models import (
    CandidateRow,
    ImportBatch,
    ItemAlias,
    ItemRow,
    JudgmentRow,
    Project,
    Rater,
    utcnow,
)
from ..store.rows import ItemRows, JudgmentRows, PairRows, item_rows, judgment_rows, rekeyed
from .formats import (
    FORMATS,
    ConvertOptions,
    RecordError,
    RecordFormat,
    detect_format,
    from_validation_error,
)
from .formats.generic import COMPARISON, comparison_pair
from .readers import DEFAULT_MAX_LINE_BYTES, ReadProblem, read_records

#: Records per database round (lookups + inserts).
CHUNK = 10_000
#: Keys per ``IN (...)`` list on SQLite (old builds allow 999 parameters; PostgreSQL gets one array).
IN_CHUNK = 900
#: Skipped-record problems kept in the batch's ``counts`` (the report keeps up to MAX_SKIPPED).
SKIPPED_IN_COUNTS = 200
MAX_SKIPPED = 10_000


@dataclass
class ImportOptions:
    #: Unknown fields go into the item's metadata instead of failing the record.
    keep_extra: bool = False
    #: Leave bad records out (listed in the report) instead of failing the whole import.
    skip_invalid: bool = False
    #: Force a record format by name (see :data:`preflab.io.formats.FORMATS`); default: detect.
    format: str | None = None
    #: Source of imported judgments whose record does not say: ``human``, ``ai`` or ``ai_assisted``.
    default_source: str = "human"
    #: Problems listed in the :class:`ImportFailed` message (all are counted).
    max_errors: int = 50
    #: Longest JSONL line accepted.
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: ``labeler`` names that are models (stored as ``source: ai``) besides the built-in patterns;
    #: :func:`import_files` adds the project's ``policy.ai_labelers`` setting.
    ai_labelers: tuple[str, ...] = ()
    #: What an imported trajectory's ``prm_steps`` verdicts become: ``label`` (a steps judgment)
    #: or ``suggestion`` (kept in the item's record only, for raters to check);
    #: :func:`import_files` takes the project's ``policy.imported_step_verdicts`` setting.
    step_verdicts: str = "label"


@dataclass
class Problem:
    file: str
    line: int | None
    field: str
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.reason}"


@dataclass
class ImportReport:
    batch_pk: int | None
    files: list[str]
    formats: dict[str, int]
    items_added: int = 0
    items_existing: int = 0
    judgments_added: int = 0
    judgments_existing: int = 0
    skipped: list[Problem] = field(default_factory=list)
    already_imported: bool = False
    #: All skipped records (``skipped`` keeps the first MAX_SKIPPED).
    skipped_count: int = 0
    #: Judgments of a kind the project does not collect that their format marks optional
    #: (:attr:`RecordFormat.optional_kinds`), left out.
    judgments_not_collected: int = 0
    #: What imported ``prm_steps`` verdicts became (``label`` or ``suggestion``; recorded in the
    #: import batch's counts).
    step_verdicts: str = "label"


class ImportFailed(Exception):
    """The import changed nothing. ``problems``: the first ``max_errors``; ``total``: all of them."""

    def __init__(self, problems: list[Problem], total: int, max_errors: int = 50) -> None:
        self.problems = problems
        self.total = total
        shown = problems[:max_errors]
        lines = [str(p) for p in shown]
        if total > len(shown):
            lines.append(f"... and {total - len(shown)} more")
        hint = "nothing was imported; fix these records, or pass --skip-invalid to import the rest"
        super().__init__(
            f"{total} problem{'s' if total != 1 else ''} ({hint}):\n" + "\n".join(lines)
        )


@dataclass
class ValidationReport:
    files: list[str]
    formats: dict[str, int]
    records: int = 0
    items: int = 0
    judgments: int = 0
    problems: list[Problem] = field(default_factory=list)
    total_problems: int = 0

    @property
    def ok(self) -> bool:
        return self.total_problems == 0


# -- converting records ---------------------------------------------------------------------


@dataclass(slots=True)
class _Record:
    file: str
    line: int | None
    format: str | None = None
    items: list[ItemRows] = field(default_factory=list)
    judgments: list[JudgmentRows] = field(default_factory=list)
    #: ``(field, reason)`` found while reading or converting.
    problems: list[tuple[str, str]] = field(default_factory=list)


def _convert_options(options: ImportOptions) -> ConvertOptions:
    return ConvertOptions(
        keep_extra=options.keep_extra,
        default_source=options.default_source,
        ai_labelers=frozenset(options.ai_labelers),
        step_verdicts=options.step_verdicts,
    )


def _forced_format(options: ImportOptions) -> RecordFormat | None:
    if options.format is None:
        return None
    if options.format not in FORMATS:
        raise ValueError(
            f"unknown record format {options.format!r}; choose from {', '.join(FORMATS)}"
        )
    return FORMATS[options.format]


class _Pair:
    """A plain-text comparison record on the lean path: its rows without dicts or pydantic.

    Bulk imports are mostly this shape (TRL-style ``{"prompt", "chosen", "rejected"}`` rows), so it
    skips format detection, :class:`_Record` and the generic row objects; anything unusual about
    it in the database (its item exists, the project does not collect pairwise judgments) turns it
    back into a :class:`_Record` (:meth:`as_record`) for the generic checks.
    """

    __slots__ = ("file", "line", "rows")
    format = COMPARISON.name
    problems: tuple[tuple[str, str], ...] = ()

    def __init__(self, file: str, line: int | None, rows: PairRows) -> None:
        self.file = file
        self.line = line
        self.rows = rows

    def as_record(self) -> _Record:
        return _Record(
            self.file, self.line, self.format, [self.rows.item_rows()], [self.rows.judgment_rows()]
        )


def _records(
    paths: Sequence[Path],
    options: ImportOptions,
    progress: Callable[[int], None] | None,
    lean: bool = True,
) -> Iterator[_Record | _Pair]:
    """Every record converted, or with its problems; ``lean``: plain comparisons as :class:`_Pair`."""
    forced = _forced_format(options)
    copts = _convert_options(options)
    # No format before ``comparison`` recognises the shape comparison_pair takes, so it may run
    # before detection.
    lean = lean and (forced is None or forced is COMPARISON)
    for path in paths:
        name = str(path)
        for line, raw in read_records(
            path, max_line_bytes=options.max_line_bytes, progress=progress
        ):
            if isinstance(raw, ReadProblem):
                yield _Record(name, raw.line, problems=[(raw.field, raw.reason)])
                continue
            if lean:
                try:
                    pair = comparison_pair(raw, copts)
                except RecordError as exc:
                    yield _Record(name, line, COMPARISON.name, problems=[(exc.field, exc.reason)])
                    continue
                if pair is not None:
                    yield _Pair(name, line, pair)
                    continue
            rec = _Record(name, line)
            try:
                fmt = forced or detect_format(raw)
                rec.format = fmt.name
                converted = fmt.convert(raw, copts)
                rec.items = [
                    i if isinstance(i, ItemRows) else item_rows(i) for i in converted.items
                ]
                rec.judgments = [
                    j if isinstance(j, JudgmentRows) else judgment_rows(j)
                    for j in converted.judgments
                ]
            except RecordError as exc:
                rec.problems.append((exc.field, exc.reason))
            except ValidationError as exc:
                err = from_validation_error(exc)
                rec.problems.append((err.field, err.reason))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                rec.problems.append(("(record)", f"{type(exc).__name__}: {exc}"))
            yield rec


# -- converting in a second process ---------------------------------------------------------

#: Files at least this large (together) are read and converted by a second process while this one
#: checks and writes, when a core is free for it (:func:`_idle_cores`): the two halves of an
#: import then overlap. Below the size the process start (~0.3 s) costs more than it
#: saves. ``PREFLAB_IMPORT_WORKER=0|1`` forces it off/on.
PARALLEL_MIN_BYTES = 16 * 2**20
#: Where the ``preflab`` package lives, for the child's import path.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _use_worker(paths: Sequence[Path]) -> bool:
    forced = os.environ.get("PREFLAB_IMPORT_WORKER")
    if forced is not None:
        return forced.strip().lower() not in ("0", "false", "no", "off", "")
    try:
        if sum(p.stat().st_size for p in paths) < PARALLEL_MIN_BYTES:
            return False
    except OSError:
        return False  # the reader reports missing files with their path
    # A core to spare? Without one the two processes take turns on the same cores, which
    # measured slower than converting here (11.5 s vs 8.4 s per 100k rows with another job busy).
    return _idle_cores() >= 0.75


def _idle_cores(window: float = 0.1) -> float:
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


def _encode_chunk(chunk: list[_Record | _Pair], read: int) -> bytes:
    """One message from the worker: bytes read since the last message, the plain comparisons as
    ``marshal``-ed state tuples (~2 µs a record each way; ``pickle`` of the objects: ~28 µs) and
    the other records pickled, each with its place in the chunk."""
    files: dict[str, int] = {}
    pairs: list[tuple[Any, ...]] = []
    others: list[tuple[int, _Record]] = []
    for i, rec in enumerate(chunk):
        if type(rec) is _Pair:
            pairs.append((i, files.setdefault(rec.file, len(files)), rec.line, rec.rows.state()))
        else:
            others.append((i, rec))  # type: ignore[arg-type]
    return pickle.dumps(
        ("chunk", read, list(files), marshal.dumps(pairs), others), protocol=pickle.HIGHEST_PROTOCOL
    )


def _decode_chunk(
    files: list[str], pairs_blob: bytes, others: list[tuple[int, _Record]]
) -> list[_Record | _Pair]:
    pairs = marshal.loads(pairs_blob)
    chunk: list[Any] = [None] * (len(pairs) + len(others))
    from_state = PairRows.from_state
    for i, f, line, state in pairs:
        chunk[i] = _Pair(files[f], line, from_state(state))
    for i, rec in others:
        chunk[i] = rec
    return chunk


def _send(out: BinaryIO, message: bytes) -> None:
    out.write(len(message).to_bytes(8, "little"))
    out.write(message)
    out.flush()


def _receive(src: BinaryIO) -> bytes | None:
    """One message, or ``None`` at the end of the stream (a short read: the writer is gone)."""
    head = src.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "little")
    message = src.read(size)
    return message if len(message) == size else None


def convert_worker_main(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The converting process (``python -m preflab.io.convert_worker``): reads the pickled
    ``(paths, options)`` from ``stdin``, writes its chunks to ``stdout``, then a ``done`` (or an
    ``error``) message."""
    gc.disable()
    paths, options = pickle.loads(stdin.read())  # noqa: S301 -- written by our own parent process
    read = 0

    def progress(n: int) -> None:
        nonlocal read
        read += n

    try:
        records = _records(paths, options, progress)
        while chunk := list(islice(records, CHUNK)):
            message = _encode_chunk(chunk, read)
            read = 0
            del chunk
            _send(stdout, message)
        _send(stdout, pickle.dumps(("done", read)))
    except BrokenPipeError:
        return  # the parent stopped listening: it failed already and reports why
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, which raises it
        _send(stdout, pickle.dumps(("error", f"{type(exc).__name__}: {exc}")))


class WorkerFailed(RuntimeError):
    """The converting process stopped without finishing (the import changed nothing)."""


@contextmanager
def _worker_chunks(
    paths: Sequence[Path], options: ImportOptions, progress: Callable[[int], None] | None
) -> Iterator[Iterator[list[_Record | _Pair]]]:
    """Chunks of converted records from a second process, in file order.

    The child is a fresh interpreter started with ``python -m preflab.io.convert_worker``:
    nothing of this process (database connections, threads, the caller's ``__main__``) is copied
    into it. Its chunks come over a pipe that holds about one of them, so it converts at most a
    chunk or two ahead of what this process has written and memory stays flat.
    """
    worker = subprocess.Popen(  # noqa: S603 -- our own module, by the running interpreter
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
    try:
        worker.stdin.write(pickle.dumps(([Path(p) for p in paths], options)))
        worker.stdin.close()
    except BrokenPipeError:
        pass  # it died at once: reported below by the missing messages

    def chunks() -> Iterator[list[_Record | _Pair]]:
        assert worker.stdout is not None
        while True:
            message = _receive(worker.stdout)
            if message is None:
                code = worker.wait()
                raise WorkerFailed(
                    f"the converting process stopped with exit code {code} before the end of "
                    "the files; nothing was imported (see its message above)"
                )
            tag, *body = pickle.loads(message)  # noqa: S301 -- from our own child process
            if tag == "error":
                raise WorkerFailed(f"converting the records failed: {body[0]}")
            if progress is not None and body[0]:
                progress(body[0])
            if tag == "done":
                return
            yield _decode_chunk(*body[1:])

    try:
        yield chunks()
    finally:
        worker.stdout.close()
        try:
            worker.wait(5)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


@contextmanager
def _chunks(
    paths: Sequence[Path], options: ImportOptions, progress: Callable[[int], None] | None
) -> Iterator[Iterator[list[_Record | _Pair]]]:
    """The converted records in chunks of ``CHUNK``: from a second process for large imports
    (:func:`_use_worker`), else converted here."""
    if _use_worker(paths):
        with _worker_chunks(paths, options, progress) as chunks:
            yield chunks
        return
    records = _records(paths, options, progress)
    yield iter(lambda: list(islice(records, CHUNK)), [])


def files_hash(paths: Sequence[Path]) -> str:
    """SHA-256 over the files' bytes (each prefixed by its length), in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


# -- writing ---------------------------------------------------------------------------------


class _Writer:
    """Bulk inserts: raw ``executemany`` on SQLite (the fast path), Core ``insert()`` elsewhere."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect
        self.sqlite = conn.dialect.name == "sqlite"
        self._datetime_proc = JUDGMENTS.c.started_at.type.dialect_impl(self.dialect).bind_processor(
            self.dialect
        )
        self._sql: dict[
            tuple[str, tuple[str, ...]], tuple[str, list[tuple[int, Callable[[Any], Any]]]]
        ] = {}

    def _prepare(
        self, table: Table, columns: tuple[str, ...], constants: tuple[str, ...]
    ) -> tuple[str, list[tuple[int, Callable[[Any], Any]]]]:
        key = (table.name, columns, constants)
        if key not in self._sql:
            procs = []
            for i, name in enumerate(columns):
                if name in constants:
                    continue
                proc = table.c[name].type.dialect_impl(self.dialect).bind_processor(self.dialect)
                if proc is not None:
                    procs.append((i, proc))
            sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            self._sql[key] = (sql, procs)
        return self._sql[key]

    def insert(
        self,
        table: Table,
        columns: tuple[str, ...],
        rows: list[tuple[Any, ...]],
        constants: tuple[str, ...] = (),
        processed: bool = False,
    ) -> None:
        """Insert ``rows`` (tuples in ``columns`` order); ``constants`` hold :meth:`constant` values.

        ``processed``: JSON values went through :meth:`json` and datetimes through :meth:`constant`
        or :meth:`datetime` already (the hot path builds its tuples that way).
        """
        if not rows:
            return
        if self.sqlite:
            _, procs = self._prepare(table, columns, constants)
            if procs and not processed:
                converted = []
                for row in rows:
                    values = list(row)
                    for i, proc in procs:
                        values[i] = proc(values[i])
                    converted.append(tuple(values))
                rows = converted
            columns, rows = _without_null_columns(columns, rows)  # the statement names the rest
            sql, _ = self._prepare(table, columns, constants)
            self.conn.exec_driver_sql(sql, rows)  # type: ignore[arg-type]
        else:
            self.conn.execute(insert(table), [dict(zip(columns, row, strict=True)) for row in rows])

    def json(self, value: Any) -> Any:
        """A JSON column value ready for :meth:`insert` with ``processed=True``."""
        if not self.sqlite or value is None:
            return value
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()

    def constant(self, table: Table, column: str, value: Any) -> Any:
        """A value bound once for every row (SQLite: processed here, not per row)."""
        if not self.sqlite:
            return value
        proc = table.c[column].type.dialect_impl(self.dialect).bind_processor(self.dialect)
        return proc(value) if proc else value

    def datetime(self, value: Any) -> Any:
        if value is None or not self.sqlite:
            return value
        return self._datetime_proc(value)

    def allocate_pks(self, table: Table, n: int) -> list[int]:
        """``n`` primary keys for rows about to be inserted by this transaction."""
        if n == 0:
            return []
        if self.sqlite:
            # This transaction already wrote (the batch row), so it holds SQLite's single write
            # lock: nobody else can insert until it commits.
            start = self.conn.execute(select(func.coalesce(func.max(table.c.pk), 0))).scalar_one()
            return list(range(start + 1, start + 1 + n))
        rows = self.conn.execute(
            text(
                f"SELECT nextval(pg_get_serial_sequence('{table.name}', 'pk')) FROM generate_series(1, :n)"
            ),
            {"n": n},
        ).scalars()
        return list(rows)


def _without_null_columns(
    columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """Drop the columns that are ``None`` in every row (an omitted column is NULL: these tables
    have no server-side defaults, a test holds that).

    Why: Python's ``sqlite3`` binds ``int``/``float``/``str``/``bytes`` directly, but any other
    value (``None`` and ``bool`` included) goes through its adapter lookup, which fails by raising
    and catching an exception: ~0.9 µs per value, measured. A comparison row carries a dozen
    ``None`` columns (no rationale, no telemetry, no rubric...), so skipping them saves more time
    than everything else the importer does to a row.
    """
    first = rows[0]
    null = [i for i, v in enumerate(first) if v is None]
    if not null:
        return columns, rows
    n = len(rows)
    all_null = [i for i in null if list(map(itemgetter(i), rows)).count(None) == n]
    if not all_null:
        return columns, rows
    dropped = set(all_null)
    keep = [i for i in range(len(columns)) if i not in dropped]
    pick = itemgetter(*keep)
    if len(keep) == 1:
        return (columns[keep[0]],), [(pick(r),) for r in rows]
    return tuple(columns[i] for i in keep), list(map(pick, rows))


ITEMS: Table = ItemRow.__table__  # type: ignore[assignment]
CANDIDATES: Table = CandidateRow.__table__  # type: ignore[assignment]
JUDGMENTS: Table = JudgmentRow.__table__  # type: ignore[assignment]
RATERS: Table = Rater.__table__  # type: ignore[assignment]
ALIASES: Table = ItemAlias.__table__  # type: ignore[assignment]

ITEM_COLUMNS = (
    "pk",
    "project_pk",
    "item_key",
    "content_hash",
    "prompt",
    "domains",
    "reference",
    "gold",
    "metadata",
    "batch_pk",
    "created_at",
)
CANDIDATE_COLUMNS = (
    "item_pk",
    "candidate_key",
    "position",
    "text",
    "messages",
    "model",
    "source",
    "metadata",
)
JUDGMENT_VALUE_KEYS = (
    "kind",
    "body",
    "rationale",
    "pair_lo",
    "pair_hi",
    "score",
    "shown_order",
    "rubric_key",
    "rubric_version",
    "review_pass",
    "source",
    "started_at",
    "submitted_at",
    "telemetry",
    "idempotency_key",
    "content_hash",
)
JUDGMENT_COLUMNS = (
    "project_pk",
    "item_pk",
    "rater_pk",
    *JUDGMENT_VALUE_KEYS,
    "batch_pk",
    "excluded",
    "created_at",
)


def _in_chunks(values: Iterable[Any]) -> Iterator[list[Any]]:
    values = list(values)
    for i in range(0, len(values), IN_CHUNK):
        yield values[i : i + IN_CHUNK]


_PAIR_FIELD = {"pairwise": "shown_order", "ranking": "order"}


def _joined_item(
    item: ItemRows,
    is_item: Callable[[str], bool],
    aliases: Callable[[str], str | None],
    by_content: Callable[[str], str | None],
    fmt: str | None,
) -> tuple[str, bool]:
    """The key the item of a record is stored under, and whether its own key is a new alias.

    An item is its content (:mod:`preflab.schema.identity`), also when a record names it: its own
    key if an item has it; else the item that key is an alias of; else the item with the same
    content hash (the record's key becomes an alias of it); else its own key (a new item). The
    one rule of :func:`import_files` and :func:`validate_files`.

    The items of a format of model samples (:attr:`RecordFormat.samples`: rollouts, trajectories)
    keep their own id: each is one output with its outcome (a reward, a verifier's result), which
    the content hash does not cover, so two samples with the same text but different outcomes (a
    flaky test) stay two instead of one losing its outcome.
    """
    if is_item(item.key):
        return item.key, False
    target = aliases(item.key)
    if target is not None:
        return target, False
    if fmt is not None and FORMATS[fmt].samples:
        return item.key, False
    target = by_content(item.content_hash)
    if target is not None and target != item.key:
        return target, True
    return item.key, False


def _different_content(key: str, target: str) -> str:
    named = repr(key) if key == target else f"{key!r} (another id of item {target!r})"
    return (
        f"item {named} already exists with different content; give the new version another id "
        "(or leave 'id' out to derive one from the content)"
    )


class _Loader:
    """Checks chunks of converted records against the database and writes the accepted rows."""

    def __init__(
        self,
        session: Any,
        project: Project,
        batch_pk: int,
        options: ImportOptions,
        report: ImportReport,
    ):
        self.session = session
        self.conn: Connection = session.connection()
        self.writer = _Writer(self.conn)
        self.project = project
        self.project_pk = project.pk
        self.batch_pk = batch_pk
        self.options = options
        self.report = report
        self.kinds = set(project.kinds)
        self.rater_pks: dict[str, int] = {}
        self.rubrics: dict[tuple[str, int | None], Rubric | None] = {}
        self.formats_seen: set[str] = set()
        # Alias lookups only once the project has any (most never do).
        self.has_aliases = (
            self.conn.execute(
                select(ALIASES.c.pk).where(ALIASES.c.project_pk == self.project_pk).limit(1)
            ).first()
            is not None
        )
        # A plain comparison (derived id) can only join a stored item of another id if that item
        # came from a record of another shape: one stored before this import, or written by it.
        # Until then its content lookup is skipped (a bulk import into a fresh project: ~10% of its time).
        self.other_ids_stored = (
            self.conn.execute(
                select(ITEMS.c.pk).where(ITEMS.c.project_pk == self.project_pk).limit(1)
            ).first()
            is not None
        )
        self.problems: list[Problem] = []
        self.problem_count = 0
        self.now = utcnow()

    # -- problems

    def _problem(self, rec: _Record, field: str, reason: str) -> None:
        problem = Problem(rec.file, rec.line, field, reason)
        self.problem_count += 1
        if self.options.skip_invalid:
            if len(self.report.skipped) < MAX_SKIPPED:
                self.report.skipped.append(problem)
        elif len(self.problems) < max(self.options.max_errors, 1):
            self.problems.append(problem)

    # -- lookups

    def _select_in(self, sql: str, values: set[str]) -> Iterator[Any]:
        """Rows of ``sql`` for every value: its ``{values}`` is an ``IN`` list (SQLite, in parts)
        or ``= ANY`` of one array (PostgreSQL); its one other parameter is the project's pk.

        Raw driver SQL: a SQLAlchemy ``select`` with an expanding ``IN`` is compiled on every
        call, which cost more than the lookup itself.
        """
        if not values:
            return
        if self.writer.sqlite:
            for part in _in_chunks(values):
                yield from self.conn.exec_driver_sql(
                    sql.format(param="?", values=f"IN ({', '.join('?' * len(part))})"),
                    (self.project_pk, *part),
                )
        else:
            yield from self.conn.exec_driver_sql(
                sql.format(param="%s", values="= ANY(%s)"), (self.project_pk, list(values))
            )

    def _existing_items(self, keys: set[str]) -> dict[str, tuple[int, str]]:
        sql = "SELECT item_key, pk, content_hash FROM items WHERE project_pk = {param} AND item_key {values}"
        return {key: (pk, digest) for key, pk, digest in self._select_in(sql, keys)}

    def _aliases(self, keys: set[str]) -> dict[str, tuple[str, int, str]]:
        """alias -> (item key, item pk, content hash) of the items these keys are aliases of."""
        if not self.has_aliases:
            return {}
        sql = (
            "SELECT a.alias_key, i.item_key, i.pk, i.content_hash FROM item_aliases a JOIN items i "
            "ON i.pk = a.item_pk WHERE a.project_pk = {param} AND a.alias_key {values}"
        )
        return {alias: (key, pk, digest) for alias, key, pk, digest in self._select_in(sql, keys)}

    def _items_by_content(self, hashes: set[str]) -> dict[str, tuple[str, int]]:
        """content hash -> (item key, pk) of the project's items with that content (the first
        imported one, should older databases hold several)."""
        sql = (
            "SELECT content_hash, item_key, pk FROM items WHERE project_pk = {param} AND content_hash {values} "
            "ORDER BY pk DESC"
        )
        return {digest: (key, pk) for digest, key, pk in self._select_in(sql, hashes)}

    def _candidate_keys(self, item_pks: dict[str, int]) -> dict[str, set[str]]:
        by_pk: dict[int, set[str]] = {pk: set() for pk in item_pks.values()}
        for part in _in_chunks(by_pk):
            for pk, key in self.conn.execute(
                select(CANDIDATES.c.item_pk, CANDIDATES.c.candidate_key).where(
                    CANDIDATES.c.item_pk.in_(part)
                )
            ):
                by_pk[pk].add(key)
        return {key: by_pk[pk] for key, pk in item_pks.items()}

    def _hashes_of_items(self, item_pks: set[int]) -> set[str]:
        """Content hashes of the judgments of these items (served by ``uq_judgments_item_content``)."""
        found: set[str] = set()
        for part in _in_chunks(item_pks):
            found.update(
                self.conn.execute(
                    select(JUDGMENTS.c.content_hash).where(JUDGMENTS.c.item_pk.in_(part))
                ).scalars()
            )
        return found

    def _existing(self, column: str, values: set[str]) -> set[str]:
        sql = f"SELECT {column} FROM judgments WHERE project_pk = {{param}} AND {column} {{values}}"
        return {value for (value,) in self._select_in(sql, values)}

    def _rubric(self, key: str, version: int | None) -> Rubric | None:
        if (key, version) not in self.rubrics:
            self.rubrics[(key, version)] = repo.get_rubric(self.session, self.project, key, version)
        return self.rubrics[(key, version)]

    def _register_rubrics(self, chunk: list[_Record]) -> None:
        if "rubric" not in self.kinds:  # a format's rubrics are for its rubric judgments only
            return
        for rec in chunk:
            if rec.format and rec.format not in self.formats_seen:
                self.formats_seen.add(rec.format)
                for rubric in FORMATS[rec.format].rubrics:
                    repo.add_rubric(
                        self.session,
                        self.project,
                        rubric,
                        make_current=self.project.rubric_key is None,
                    )
                    self.rubrics.clear()

    def _rater_pks(self, keys: set[str]) -> None:
        missing = keys - self.rater_pks.keys()
        for part in _in_chunks(missing):
            for key, pk in self.conn.execute(
                select(RATERS.c.rater_key, RATERS.c.pk).where(
                    RATERS.c.project_pk == self.project_pk, RATERS.c.rater_key.in_(part)
                )
            ):
                self.rater_pks[key] = pk
        new = sorted(keys - self.rater_pks.keys())
        if new:
            pks = self.writer.allocate_pks(RATERS, len(new))
            created = self.writer.constant(RATERS, "created_at", self.now)
            self.writer.insert(
                RATERS,
                ("pk", "project_pk", "rater_key", "rater_hash", "created_at"),
                [
                    (pk, self.project_pk, key, rater_hash(key, self.project.secret), created)
                    for pk, key in zip(pks, new, strict=True)
                ],
                constants=("created_at",),
            )
            self.rater_pks.update(zip(new, pks, strict=True))

    # -- one chunk

    def load(self, chunk: list[_Record | _Pair]) -> None:
        self._register_rubrics(chunk)
        item_keys: set[str] = set()
        idem: set[str] = set()
        referenced: set[str] = set()  # items judged by generic records
        pairs: list[PairRows] = []
        for rec in chunk:
            if type(rec) is _Pair:
                pairs.append(rec.rows)
                continue
            item_keys.update(i.key for i in rec.items)
            for j in rec.judgments:
                referenced.add(j.item_key)
                if j.idempotency_key:
                    idem.add(j.idempotency_key)
        named = item_keys | referenced | {p.item_key for p in pairs}
        existing_items = self._existing_items(named)
        # Items this chunk names by an alias or brings again under another id (found by content).
        aliases = self._aliases(named - existing_items.keys())
        unnamed = {
            i.content_hash
            for rec in chunk
            if type(rec) is not _Pair
            for i in rec.items  # type: ignore[union-attr]
            if i.key not in existing_items and i.key not in aliases
        }
        if self.other_ids_stored:
            unnamed.update(p.item_hash for p in pairs if p.item_key not in existing_items)
        by_content = self._items_by_content(unnamed)
        joined = {key: (pk, digest) for key, pk, digest in aliases.values()}
        joined.update((key, (pk, digest)) for digest, (key, pk) in by_content.items())
        for key, value in joined.items():
            existing_items.setdefault(key, value)
        # A judgment's content hash covers its item's key, and judgments are stored with their
        # item (unique per item_pk and hash): one of an item the project does not have is not in
        # the database either. So only the judgments of existing items are looked up (a fresh
        # import: none), by item.
        judged = {existing_items[p.item_key][0] for p in pairs if p.item_key in existing_items}
        judged.update(existing_items[k][0] for k in referenced if k in existing_items)
        judged.update(pk for pk, _ in joined.values())
        # Items judged in this chunk that the database has (this chunk's records may fail, or come later).
        outside = {k: existing_items[k][0] for k in referenced if k in existing_items}
        outside.update((aliases[k][0], aliases[k][1]) for k in referenced if k in aliases)
        state = _ChunkState(
            existing_items=existing_items,
            aliases={alias: key for alias, (key, _, _) in aliases.items()},
            by_content={digest: key for digest, (key, _) in by_content.items()},
            outside_candidates=self._candidate_keys(outside) if outside else {},
            existing_hashes=self._hashes_of_items(judged),
            existing_idem=self._existing("idempotency_key", idem),
        )
        report = self.report
        formats = report.formats
        known, accepted_items, new_judgments, seen_hashes = (
            state.known,
            state.accepted_items,
            state.new_judgments,
            state.seen_hashes,
        )
        existing_hashes, by_content_ = state.existing_hashes, state.by_content
        pairwise = "pairwise" in self.kinds
        for rec in chunk:
            if type(rec) is _Pair:
                p = rec.rows
                key = p.item_key
                if (
                    pairwise
                    and key not in known
                    and key not in existing_items
                    and p.item_hash not in by_content_
                ):
                    # The common case, decided here as _check would decide it: a new item, and a
                    # judgment of its own candidates, new unless its hash is known.
                    known[key] = (p.item_hash, p.candidate_keys)
                    by_content_[p.item_hash] = key
                    accepted_items[key] = p
                    report.items_added += 1
                    h = p.content_hash
                    if h in existing_hashes or h in seen_hashes:
                        report.judgments_existing += 1
                    else:
                        seen_hashes.add(h)
                        new_judgments.append(p)
                        report.judgments_added += 1
                    formats[rec.format] = formats.get(rec.format, 0) + 1
                    continue
                rec = rec.as_record()
            self._check(rec, state)
        if not self.other_ids_stored:
            self.other_ids_stored = any(
                type(i) is not PairRows for i in state.accepted_items.values()
            )
        self._write(state.accepted_items, state.new_judgments, existing_items, state.new_aliases)

    def _check(self, rec: _Record, state: _ChunkState) -> None:
        """Check one record against the database and the chunk so far; accept it or list its problems."""
        if rec.problems:
            for fld, reason in rec.problems:
                self._problem(rec, fld, reason)
            return
        report = self.report
        known, existing_items = state.known, state.existing_items
        problems: list[tuple[str, str]] = []
        rec_new: list[ItemRows] = []
        rec_existing = 0
        rec_known: dict[str, tuple[str, Collection[str]]] = {}
        rec_aliases: dict[str, str] = {}  # this record's ids of items stored under another key
        rec_by_content: dict[str, str] = {}
        new_aliases: dict[str, str] = {}

        def is_item(key: str) -> bool:
            return key in known or key in rec_known or key in existing_items

        def alias(key: str) -> str | None:
            return rec_aliases.get(key) or state.aliases.get(key)

        def by_content(digest: str) -> str | None:
            return rec_by_content.get(digest) or state.by_content.get(digest)

        for item in rec.items:
            key, new_alias = _joined_item(item, is_item, alias, by_content, rec.format)
            if key != item.key:
                rec_aliases[item.key] = key
                if new_alias:
                    new_aliases[item.key] = key
            prior = known.get(key) or rec_known.get(key)
            if prior is None and key in existing_items:
                prior = (existing_items[key][1], set(item.candidate_keys))
                rec_known[key] = prior
                if prior[0] == item.content_hash:
                    rec_existing += 1
                    continue
            if prior is not None:
                if prior[0] != item.content_hash:
                    problems.append(("id", _different_content(item.key, key)))
                else:
                    rec_existing += 1
                continue
            rec_new.append(item)
            rec_known[key] = (item.content_hash, set(item.candidate_keys))
            rec_by_content[item.content_hash] = key
        rec_judgments: list[JudgmentRows] = []
        rec_judgments_existing = 0
        rec_hashes: set[str] = set()
        rec_not_collected = 0
        for j in rec.judgments:
            if j.kind not in self.kinds:
                if rec.format and j.kind in FORMATS[rec.format].optional_kinds:
                    rec_not_collected += 1
                    continue
                problems.append(
                    (
                        "kind",
                        f"project {self.project.name!r} collects {sorted(self.kinds)}, not {j.kind!r}; "
                        "add the kind to the project or leave these judgments out",
                    )
                )
                continue
            target = alias(j.item_key)
            if target is not None:
                j = rekeyed(j, target)
            entry = rec_known.get(j.item_key) or known.get(j.item_key)
            candidates = entry[1] if entry else state.outside_candidates.get(j.item_key)
            if candidates is None:
                problems.append(
                    (
                        "item_id",
                        f"no item {j.item_key!r} in project {self.project.name!r} or earlier in this "
                        "import; import the item before its judgments",
                    )
                )
                continue
            unknown = [c for c in j.candidate_ids if c not in candidates]
            if unknown:
                problems.append(
                    (
                        _PAIR_FIELD.get(j.kind, "candidate_id"),
                        f"{unknown[0]!r} is not a candidate of item {j.item_key!r} (it has {', '.join(sorted(candidates))})",
                    )
                )
                continue
            if j.rubric is not None:
                rkey, rversion, scores, vetoes = j.rubric
                rubric = self._rubric(rkey, rversion)
                if rubric is None:
                    problems.append(
                        (
                            "provenance.rubric_id",
                            f"project {self.project.name!r} has no rubric {rkey!r}"
                            + (f" version {rversion}" if rversion else "")
                            + "; add the rubric first",
                        )
                    )
                    continue
                for p in rubric.check_scores(scores, vetoes):
                    fld, _, reason = p.partition(": ")
                    problems.append((fld, reason))
            if (
                j.content_hash in state.existing_hashes
                or j.content_hash in state.seen_hashes
                or j.content_hash in rec_hashes
                or (
                    j.idempotency_key
                    and (
                        j.idempotency_key in state.existing_idem
                        or j.idempotency_key in state.seen_idem
                    )
                )
            ):
                rec_judgments_existing += 1
                continue
            rec_hashes.add(j.content_hash)
            rec_judgments.append(j)
        if problems:
            for fld, reason in problems:
                self._problem(rec, fld, reason)
            return
        for item in rec_new:
            state.accepted_items[item.key] = item
        known.update(rec_known)
        state.by_content.update(rec_by_content)
        state.aliases.update(new_aliases)
        state.new_aliases.update(new_aliases)
        state.new_judgments.extend(rec_judgments)
        state.seen_hashes |= rec_hashes
        state.seen_idem.update(j.idempotency_key for j in rec_judgments if j.idempotency_key)
        report.items_added += len(rec_new)
        report.items_existing += rec_existing
        report.judgments_added += len(rec_judgments)
        report.judgments_existing += rec_judgments_existing
        report.judgments_not_collected += rec_not_collected
        if rec.format:
            report.formats[rec.format] = report.formats.get(rec.format, 0) + 1

    def _write(
        self,
        items: dict[str, ItemRows | PairRows],
        judgments: list[JudgmentRows | PairRows],
        existing_items: dict[str, tuple[int, str]],
        aliases: dict[str, str],
    ) -> None:
        w = self.writer
        if (
            not w.sqlite
        ):  # the lean rows are for SQLite's raw executemany; elsewhere the generic ones
            items = {k: i.item_rows() if type(i) is PairRows else i for k, i in items.items()}
            judgments = [j.judgment_rows() if type(j) is PairRows else j for j in judgments]
        item_pks = {key: pk for key, (pk, _) in existing_items.items()}
        pks = w.allocate_pks(ITEMS, len(items))
        created = w.constant(ITEMS, "created_at", self.now)
        item_rows_: list[tuple[Any, ...]] = []
        candidate_rows: list[tuple[Any, ...]] = []
        project_pk, batch_pk = self.project_pk, self.batch_pk
        J = w.json  # noqa: N806
        empty_list, empty_dict = J([]), J({})
        for pk, (key, item) in zip(pks, items.items(), strict=True):
            item_pks[key] = pk
            if type(item) is PairRows:
                item_rows_.append(
                    (
                        pk,
                        project_pk,
                        key,
                        item.item_hash,
                        item.prompt_json,
                        empty_list,
                        None,
                        None,
                        empty_dict,
                        batch_pk,
                        created,
                    )
                )
                (c0, c1), (t0, t1) = item.candidate_keys, item.texts
                candidate_rows.append((pk, c0, 0, t0, None, None, "model", empty_dict))
                candidate_rows.append((pk, c1, 1, t1, None, None, "model", empty_dict))
                continue
            v = item.values
            item_rows_.append(
                (
                    pk,
                    project_pk,
                    key,
                    item.content_hash,
                    J(v["prompt"]),
                    J(v["domains"]) if v["domains"] else empty_list,
                    v["reference"],
                    J(v["gold"]),
                    J(v["meta"]) if v["meta"] else empty_dict,
                    batch_pk,
                    created,
                )
            )
            for c in item.candidates:
                candidate_rows.append(
                    (
                        pk,
                        c["candidate_key"],
                        c["position"],
                        c["text"],
                        J(c["messages"]),
                        c["model"],
                        c["source"],
                        J(c["meta"]) if c["meta"] else empty_dict,
                    )
                )
        w.insert(ITEMS, ITEM_COLUMNS, item_rows_, constants=("created_at",), processed=True)
        w.insert(CANDIDATES, CANDIDATE_COLUMNS, candidate_rows, processed=True)
        del item_rows_, candidate_rows
        if aliases:
            alias_pks = w.allocate_pks(ALIASES, len(aliases))
            w.insert(
                ALIASES,
                ("pk", "project_pk", "alias_key", "item_pk"),
                [
                    (pk, project_pk, alias, item_pks[key])
                    for pk, (alias, key) in zip(alias_pks, aliases.items(), strict=True)
                ],
            )
            self.has_aliases = True
        if not judgments:
            return
        self._rater_pks({j.rater_key for j in judgments})
        excluded = w.constant(JUDGMENTS, "excluded", False)
        jcreated = w.constant(JUDGMENTS, "created_at", self.now)
        started = self.writer.datetime
        rater_pks = self.rater_pks
        rows = []
        for j in judgments:
            if type(j) is PairRows:
                rows.append(
                    (
                        project_pk,
                        item_pks[j.item_key],
                        rater_pks[j.rater_key],
                        "pairwise",
                        j.body_json,
                        None,
                        j.pair_lo,
                        j.pair_hi,
                        j.score,
                        j.shown_order_json,
                        None,
                        None,
                        0,
                        j.source,
                        None,
                        None,
                        None,
                        None,
                        j.content_hash,
                        batch_pk,
                        excluded,
                        jcreated,
                    )
                )
                continue
            v = j.values
            rows.append(
                (
                    project_pk,
                    item_pks[j.item_key],
                    rater_pks[j.rater_key],
                    v["kind"],
                    J(v["body"]),
                    v["rationale"],
                    v["pair_lo"],
                    v["pair_hi"],
                    v["score"],
                    J(v["shown_order"]),
                    v["rubric_key"],
                    v["rubric_version"],
                    v["review_pass"],
                    v["source"],
                    started(v["started_at"]),
                    started(v["submitted_at"]),
                    J(v["telemetry"]),
                    v["idempotency_key"],
                    v["content_hash"],
                    batch_pk,
                    excluded,
                    jcreated,
                )
            )
        w.insert(
            JUDGMENTS, JUDGMENT_COLUMNS, rows, constants=("excluded", "created_at"), processed=True
        )


@dataclass(slots=True)
class _ChunkState:
    """What the checks of one chunk share: the database's answers and what the chunk accepted so far."""

    existing_items: dict[str, tuple[int, str]]
    outside_candidates: dict[str, set[str]]
    existing_hashes: set[str]
    existing_idem: set[str]
    #: alias -> item key: the database's aliases named in this chunk, and the chunk's new ones
    aliases: dict[str, str]
    #: content hash -> item key: the database's items this chunk may join, and the chunk's own
    by_content: dict[str, str]
    #: item key -> (content hash, candidate keys) of the items seen in this chunk
    known: dict[str, tuple[str, Collection[str]]] = field(default_factory=dict)
    accepted_items: dict[str, ItemRows | PairRows] = field(default_factory=dict)
    new_judgments: list[JudgmentRows | PairRows] = field(default_factory=list)
    seen_hashes: set[str] = field(default_factory=set)
    seen_idem: set[str] = field(default_factory=set)
    #: alias -> item key, to write with the chunk
    new_aliases: dict[str, str] = field(default_factory=dict)


#: SQLite page cache for an import (KiB). A large import inserts into two indexes at random
#: places (items by key, judgments by content hash); once they outgrow the default 2 MB cache,
#: every insert reads and rewrites a page. The cache is allocated as it fills, so small imports
#: do not pay for it.
IMPORT_CACHE_KIB = int(os.environ.get("PREFLAB_IMPORT_CACHE_KIB", 192 * 1024))


@contextmanager
def _import_cache(conn: Connection) -> Iterator[None]:
    """SQLite: a larger page cache for this import's connection, restored afterwards."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")


# -- the public API ------------------------------------------------------------------------------


def import_files(
    engine: Any,
    project_name: str,
    paths: Sequence[Path],
    options: ImportOptions = ImportOptions(),  # noqa: B008 - a frozen-by-convention default
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import ``paths`` into project ``project_name`` in one transaction; see the module doc."""
    paths = [Path(p) for p in paths]
    _forced_format(options)
    digest = files_hash(paths)
    report = ImportReport(batch_pk=None, files=[str(p) for p in paths], formats={})
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        previous = session.scalar(
            select(ImportBatch).where(
                ImportBatch.project_pk == project.pk, ImportBatch.content_hash == digest
            )
        )
        if previous is not None:
            report.batch_pk = previous.pk
            report.already_imported = True
            report.formats = dict(previous.counts.get("formats", {}))
            return report
        batch = ImportBatch(
            project_pk=project.pk, content_hash=digest, sources=report.files, format="", counts={}
        )
        session.add(batch)
        session.flush()
        report.batch_pk = batch.pk
        options = _with_project_step_verdicts(_with_project_ai_labelers(options, project), project)
        report.step_verdicts = options.step_verdicts
        loader = _Loader(session, project, batch.pk, options, report)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # millions of short-lived objects, no cycles: the collector only costs time here
        try:
            with _import_cache(loader.conn), _chunks(paths, options, progress) as chunks:
                for chunk in chunks:
                    loader.load(chunk)
                    del chunk  # freed before the collection, not traversed by it
                    gc.collect(
                        0
                    )  # the youngest generation only: frees any cycles, keeps memory flat
        finally:
            if gc_was_enabled:
                gc.enable()
        if loader.problem_count and not options.skip_invalid:
            raise ImportFailed(loader.problems, loader.problem_count, options.max_errors)
        report.skipped_count = loader.problem_count if options.skip_invalid else 0
        counts = {
            "items_added": report.items_added,
            "items_existing": report.items_existing,
            "judgments_added": report.judgments_added,
            "judgments_existing": report.judgments_existing,
            "formats": report.formats,
            "skipped": report.skipped_count,
            "judgments_not_collected": report.judgments_not_collected,
            "skipped_problems": [str(p) for p in report.skipped[:SKIPPED_IN_COUNTS]],
            "step_verdicts": report.step_verdicts,
        }
        fmt = ",".join(sorted(report.formats)) or "none"
        session.execute(
            update(ImportBatch)
            .where(ImportBatch.pk == batch.pk)
            .values(format=fmt[:50], counts=counts)
        )
        session.expire(batch)
    return report


def _with_project_ai_labelers(options: ImportOptions, project: Project) -> ImportOptions:
    """``options`` with the project's ``policy.ai_labelers`` setting added (read raw: io does not
    import the server, whose ``Policy`` model validates the setting when it is changed)."""
    policy = (project.settings or {}).get("policy") or {}
    names = tuple(str(n) for n in policy.get("ai_labelers") or ())
    if not names:
        return options
    return dataclasses.replace(options, ai_labelers=tuple(options.ai_labelers) + names)


def _with_project_step_verdicts(options: ImportOptions, project: Project) -> ImportOptions:
    """``options`` with the project's ``policy.imported_step_verdicts`` setting (read raw, like
    :func:`_with_project_ai_labelers`; the server's ``Policy`` validates it when it changes)."""
    mode = ((project.settings or {}).get("policy") or {}).get("imported_step_verdicts") or "label"
    return dataclasses.replace(options, step_verdicts=str(mode))


def validate_files(
    paths: Sequence[Path], options: ImportOptions = ImportOptions()
) -> ValidationReport:  # noqa: B008
    """The record checks of :func:`import_files` without a database.

    Checks everything a file says about itself: reading, formats, types, unknown fields, item ids
    reused with different content, judgments naming candidates their item (when in these files)
    does not have. Not checked: items in the database, judgment kinds a project collects, rubrics.
    """
    paths = [Path(p) for p in paths]
    _forced_format(options)
    report = ValidationReport(files=[str(p) for p in paths], formats={})
    formats: Counter[str] = Counter()
    items: dict[str, tuple[str, frozenset[str]]] = {}
    aliases: dict[str, str] = {}
    by_content: dict[str, str] = {}

    def problem(rec: _Record, fld: str, reason: str) -> None:
        report.total_problems += 1
        if len(report.problems) < max(options.max_errors, 1):
            report.problems.append(Problem(rec.file, rec.line, fld, reason))

    for rec in _records(paths, options, None, lean=False):
        assert isinstance(rec, _Record)
        if rec.problems:
            for fld, reason in rec.problems:
                problem(rec, fld, reason)
            continue
        report.records += 1
        formats[rec.format or "?"] += 1
        for item in rec.items:
            report.items += 1
            key, _ = _joined_item(item, items.__contains__, aliases.get, by_content.get, rec.format)
            if key != item.key:
                aliases[item.key] = key
            prior = items.get(key)
            if prior is not None and prior[0] != item.content_hash:
                problem(rec, "id", _different_content(item.key, key) + " (earlier in these files)")
            elif prior is None:
                items[key] = (item.content_hash, frozenset(item.candidate_keys))
                by_content[item.content_hash] = key
        for j in rec.judgments:
            report.judgments += 1
            entry = items.get(aliases.get(j.item_key, j.item_key))
            if entry is not None:
                unknown = [c for c in j.candidate_ids if c not in entry[1]]
                if unknown:
                    problem(
                        rec,
                        _PAIR_FIELD.get(j.kind, "candidate_id"),
                        f"{unknown[0]!r} is not a candidate of item {j.item_key!r}",
                    )
    report.formats = dict(formats)
    return report


__all__ = [
    "ImportFailed",
    "ImportOptions",
    "ImportReport",
    "Problem",
    "ValidationReport",
    "files_hash",
    "import_files",
    "validate_files",
]
