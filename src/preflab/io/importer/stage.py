"""Plain comparisons staged by the converting process, moved into SQLite by SQLite itself.

On SQLite the converting process (:mod:`.worker`) writes each chunk's plain comparisons into an
unjournaled in-memory SQLite database (:func:`stage_pairs`) and sends its image
(``serialize()``) with only what the checks need (:class:`StagedRows`: keys and hashes). The
writer puts the image under the schema ``preflab_stage`` of its own connection
(``deserialize``, inside the import's transaction) and moves the accepted rows with one
``INSERT ... SELECT`` per table and run of rows (:class:`Mover`), so no value of those rows
passes through Python's ``sqlite3`` binding in the writing process.

Why one image per chunk and not one staging file for the whole import: the import is one
transaction, and SQLite keeps a read lock on every attached database that transaction has read
until it ends, so the converting process could not add to a file the writer has read from
(measured: "database is locked"), and ``DETACH`` inside a transaction fails too. A fresh image
replaces the attached schema at any time.

The rows are those :meth:`.columns.RowBuilder.pair_items` (``pair_candidates``,
``pair_judgments``) build from the same :class:`~preflab.store.rows.PairRows`; a test holds
both paths write identical rows, keys included.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from ...store.rows import PairRows
from .writer import _without_null_columns

SCHEMA = "preflab_stage"

#: One row a comparison (``seq``: its place among the chunk's staged pairs): every value of its
#: :class:`PairRows` but the prompt, which is its JSON text read back (a string's round trip),
#: with both candidates in the row (``key0, text0, key1, text1``; the writer makes their two
#: rows). One row, not a row a candidate: the staging is ~40% of the converting process, and
#: SQLite's cost is per row (measured 5.1 -> 2.9 µs a comparison).
_PAIR_COLUMNS = (
    *(c for c in PairRows.__slots__ if c not in ("prompt", "texts", "candidate_keys")),
    "key0",
    "text0",
    "key1",
    "text1",
)
#: Large pages: fewer page splits while staging (2.9 -> 2.5 µs a comparison, measured); the
#: image's page size is its own, the writer's database keeps its own.
_PAGE_SIZE = 65536
_CREATE = f"CREATE TABLE pairs (seq INTEGER PRIMARY KEY, {', '.join(_PAIR_COLUMNS)})"


def stage_pairs(pairs: Sequence[PairRows]) -> bytes:
    """The image of an unjournaled in-memory database holding ``pairs`` (``seq``: their index)."""
    rows = [
        (seq, p.item_key, p.item_hash, p.prompt_json, p.rater_key, p.source,
         p.winner, p.strength, p.score, p.content_hash, p.pair_lo, p.pair_hi, p.body_json,
         p.shown_order_json, *_interleaved(p.candidate_keys, p.texts))
        for seq, p in enumerate(pairs)
    ]  # fmt: skip
    # Columns NULL in every row are left out: sqlite3 binds None through a slow path (see
    # writer._without_null_columns); a plain comparison has no strength.
    columns, rows = _without_null_columns(("seq", *_PAIR_COLUMNS), rows)
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=OFF")
        db.execute(f"PRAGMA page_size={_PAGE_SIZE}")
        db.execute(_CREATE)
        db.execute("BEGIN")
        db.executemany(
            f"INSERT INTO pairs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            rows,
        )
        db.execute("COMMIT")
        return db.serialize()
    finally:
        db.close()


def _interleaved(keys: tuple[str, str], texts: tuple[str, str]) -> tuple[str, str, str, str]:
    return keys[0], texts[0], keys[1], texts[1]


class WrittenKeys:
    """A set of item keys as a Bloom filter (4 MiB, two bits a key): :meth:`maybe` gives every
    key added and, at a million of them, ~0.3% of the others.

    The converting process keeps one of the item keys of every record it converted, and sends
    with each staged chunk the keys that may have come before (:attr:`Stage.repeats`). Why: in a
    project that had no items, a staged chunk's items need a database lookup only where an
    earlier chunk may have written them; a join with the stage costs ~1 µs an item in SQLite's
    index (~2 s at 1M comparisons, nearly all finding nothing), this ~0.5 µs a key, and in the
    converting process, off the writer's path. Python's ``hash`` of a key is random but the same
    within one process, which is all the filter needs. (Plain Python: numpy would do it faster,
    but importing it costs each process ~12 MB.)
    """

    BITS = 1 << 25

    def __init__(self) -> None:
        self.bits = bytearray(self.BITS // 8)

    def add(self, keys: Iterable[str]) -> None:
        bits, mask = self.bits, self.BITS - 1
        for h in map(hash, keys):
            a, b = h & mask, (h >> 32) & mask
            bits[a >> 3] |= 1 << (a & 7)
            bits[b >> 3] |= 1 << (b & 7)

    def maybe(self, keys: Iterable[str]) -> list[str]:
        bits, mask = self.bits, self.BITS - 1
        found = []
        for key in keys:
            h = hash(key)
            a, b = h & mask, (h >> 32) & mask
            if bits[a >> 3] >> (a & 7) & 1 and bits[b >> 3] >> (b & 7) & 1:
                found.append(key)
        return found

    def maybe_then_add(self, keys: Iterable[str]) -> list[str]:
        """:meth:`maybe` of ``keys`` as they were before this call, then :meth:`add` them
        (one hash a key; a key twice among them answers the second time)."""
        bits, mask = self.bits, self.BITS - 1
        found = []
        for key in keys:
            h = hash(key)
            a, b = h & mask, (h >> 32) & mask
            ia, ma, ib, mb = a >> 3, 1 << (a & 7), b >> 3, 1 << (b & 7)
            if bits[ia] & ma and bits[ib] & mb:
                found.append(key)
            else:
                bits[ia] |= ma
                bits[ib] |= mb
        return found


class Stage:
    """One chunk's staged comparisons: the database image, read back only when a record needs
    the generic checks (:meth:`pair_rows`), and ``repeats``: the item keys among them that an
    earlier record the converting process converted may have had (:class:`WrittenKeys`)."""

    __slots__ = ("image", "repeats", "_reader")

    def __init__(self, image: bytes, repeats: list[str]) -> None:
        self.image = image
        self.repeats = repeats
        self._reader: sqlite3.Connection | None = None

    def light_rows(self) -> list[tuple[Any, ...]]:
        """What the checks read of every staged comparison (:class:`StagedRows`' values after
        its stage and place), in ``seq`` order: read back from the image rather than sent
        beside it, as most chunks never need them."""
        try:
            return [
                (item_key, item_hash, (k0, k1), content_hash, rater_key)
                for item_key, item_hash, k0, k1, content_hash, rater_key in self._read(
                    "SELECT item_key, item_hash, key0, key1, content_hash, rater_key FROM pairs "
                    "ORDER BY seq"
                )
            ]
        finally:
            self.close()

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        if self._reader is None:
            self._reader = sqlite3.connect(":memory:")
            self._reader.deserialize(self.image)
        return self._reader.execute(sql, params)

    def close(self) -> None:
        """Let go of the image's copy that :meth:`_read` opened (:meth:`pair_rows` opens it
        again when asked). Explicitly: a ``sqlite3`` connection is in a reference cycle with its
        statement cache, and the import runs with the collector off (collecting only the
        youngest generation), so a reader left open outlived its chunk, its copy of the image
        with it: a chunk's worth of memory for every chunk with a repeat (1.7 GB at 1M)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def pair_rows(self, seq: int) -> PairRows:
        """Every value of comparison ``seq``, as the converting process built it."""
        (item_key, item_hash, prompt_json, rater_key, source, winner, strength, score,
         content_hash, pair_lo, pair_hi, body_json, shown_order_json, k0, t0, k1,
         t1) = self._read(
            f"SELECT {', '.join(_PAIR_COLUMNS)} FROM pairs WHERE seq = ?", (seq,)
        ).fetchone()  # fmt: skip
        return PairRows.from_state(
            (item_key, item_hash, orjson.loads(prompt_json), prompt_json, (t0, t1), (k0, k1),
             rater_key, source, winner, strength, score, content_hash, pair_lo, pair_hi,
             body_json, shown_order_json)
        )  # fmt: skip


class StagedRows:
    """A staged comparison as the writer sees it: what the checks read, and where its rows are.

    Stands in for :class:`~preflab.store.rows.PairRows` in :class:`.convert.Pair`;
    :meth:`item_rows` and :meth:`judgment_rows` (the generic checks' way in) read the rest from
    the stage.
    """

    __slots__ = (
        "stage",
        "seq",
        "item_key",
        "item_hash",
        "candidate_keys",
        "content_hash",
        "rater_key",
    )

    def __init__(
        self,
        stage: Stage,
        seq: int,
        item_key: str,
        item_hash: str,
        candidate_keys: tuple[str, str],
        content_hash: str,
        rater_key: str,
    ) -> None:
        self.stage, self.seq = stage, seq
        self.item_key, self.item_hash = item_key, item_hash
        self.candidate_keys = candidate_keys
        self.content_hash, self.rater_key = content_hash, rater_key

    def item_rows(self) -> Any:
        return self.stage.pair_rows(self.seq).item_rows()

    def judgment_rows(self) -> Any:
        return self.stage.pair_rows(self.seq).judgment_rows()


#: Above this many runs of rows (:func:`_segments`), a move is one statement that is given each
#: row's place and key (:func:`_picked`) instead of one a run: a chunk whose records judge items
#: met before leaves a gap a repeat.
MAX_SEGMENTS = 8


def _picked(seqs: Sequence[int], pks: Sequence[int]) -> str:
    """``[[seq, pk], ...]`` as JSON, for ``json_each`` (SQLite 3.38+: :attr:`Loader.stages`)."""
    return orjson.dumps(list(zip(seqs, pks, strict=True))).decode()


def _segments(seqs: Sequence[int], pks: Sequence[int]) -> list[tuple[int, int, int]]:
    """:func:`_spans`, neighbours that continue each other joined."""
    joined: list[tuple[int, int, int]] = []
    for lo, hi, delta in _spans(seqs, pks):
        if joined and joined[-1][1] + 1 == lo and joined[-1][2] == delta:
            joined[-1] = (joined[-1][0], hi, delta)
        else:
            joined.append((lo, hi, delta))
    return joined


def _spans(
    seqs: Sequence[int], pks: Sequence[int], lo: int = 0, hi: int | None = None
) -> Iterator[tuple[int, int, int]]:
    """``(first seq, last seq, pk - seq)`` of runs where both go up by one: the rows one
    ``INSERT ... SELECT`` can move. Both must be strictly increasing (rows in the order they were
    accepted, keys allocated in that order); then a span is one run when both cover as many
    values as it has rows, so every staged comparison accepted costs one check a chunk, and each
    gap (a record left out) a few halvings."""
    hi = len(seqs) if hi is None else hi
    if hi <= lo:
        return
    last = hi - 1
    if seqs[last] - seqs[lo] == last - lo and pks[last] - pks[lo] == last - lo:
        yield seqs[lo], seqs[last], pks[lo] - seqs[lo]
        return
    mid = (lo + hi) // 2
    yield from _spans(seqs, pks, lo, mid)
    yield from _spans(seqs, pks, mid, hi)


class Mover:
    """Moves staged rows into the tables of the writer's SQLite connection, in ``seq`` order.

    ``driver``: the import transaction's own ``sqlite3`` connection. The constant columns come
    as the bulk writer binds them (``created_at`` processed once, JSON as text).
    """

    def __init__(self, driver: sqlite3.Connection) -> None:
        self.driver = driver
        self.current: Stage | None = None

    def use(self, stage: Stage) -> None:
        """Put ``stage``'s image under :data:`SCHEMA` (replacing the previous chunk's)."""
        if stage is self.current:
            return
        if self.current is None and SCHEMA not in {
            row[1] for row in self.driver.execute("PRAGMA database_list")
        }:  # (left attached to this pooled connection by an import that failed while closing)
            self.driver.execute(f"ATTACH DATABASE ':memory:' AS {SCHEMA}")
        self.driver.deserialize(stage.image, name=SCHEMA)
        self.current = stage

    def close(self) -> None:
        """Detach the stage. ``DETACH`` fails inside a transaction that has read the schema, so
        an empty image replaces it first (a fresh image has no transaction open)."""
        if self.current is None:
            return
        empty = sqlite3.connect(":memory:")
        try:
            empty.execute("PRAGMA user_version = 1")  # a database of no pages has no image
            self.driver.deserialize(empty.serialize(), name=SCHEMA)
        finally:
            empty.close()
        self.driver.execute(f"DETACH DATABASE {SCHEMA}")
        self.current = None

    def stored_items(self, stage: Stage, project_pk: int) -> dict[str, tuple[int, str]]:
        """item key -> (pk, content hash) of the project's items that ``stage`` names."""
        self.use(stage)
        rows = self.driver.execute(
            "SELECT i.item_key, i.pk, i.content_hash FROM "
            f"{SCHEMA}.pairs s JOIN main.items i ON i.project_pk = ? AND i.item_key = s.item_key",
            (project_pk,),
        )
        return {key: (pk, digest) for key, pk, digest in rows}

    def items(
        self, stage: Stage, seqs: Sequence[int], pks: Sequence[int], same: dict[str, Any]
    ) -> None:
        """The items and their candidates (``same``: project_pk, domains, metadata, batch_pk,
        created_at, candidate metadata)."""
        self.use(stage)
        items = (
            "INSERT OR ROLLBACK INTO items (pk, project_pk, item_key, content_hash, prompt, domains, metadata, "
            f"batch_pk, created_at) SELECT seq + ?, ?, item_key, item_hash, prompt_json, ?, ?, ?, ? "
            f"FROM {SCHEMA}.pairs WHERE seq BETWEEN ? AND ? ORDER BY seq"
        )
        # Two rows a staged comparison, position 0 then 1 (the order their pks come in).
        candidates = (
            "INSERT OR ROLLBACK INTO candidates (item_pk, candidate_key, position, text, source, metadata) "
            "SELECT seq + ?, iif(position, key1, key0), position, iif(position, text1, text0), "
            f"'model', ? FROM {SCHEMA}.pairs CROSS JOIN (SELECT 0 AS position UNION ALL "
            "SELECT 1) WHERE seq BETWEEN ? AND ? ORDER BY seq, position"
        )
        segments = _segments(seqs, pks)
        if len(segments) > MAX_SEGMENTS:
            self._items_picked(seqs, pks, same)
            return
        for lo, hi, delta in segments:
            self.driver.execute(
                items,
                (delta, same["project_pk"], same["domains"], same["metadata"], same["batch_pk"],
                 same["created_at"], lo, hi),
            )  # fmt: skip
        for lo, hi, delta in segments:
            self.driver.execute(candidates, (delta, same["candidate_metadata"], lo, hi))

    def _items_picked(self, seqs: Sequence[int], pks: Sequence[int], same: dict[str, Any]) -> None:
        """:meth:`items` for rows scattered over the stage (the items of a chunk whose other
        records judge items met before): one statement a table, each row's pk given."""
        picked = _picked(seqs, pks)
        items = (
            "INSERT OR ROLLBACK INTO items (pk, project_pk, item_key, content_hash, prompt, domains, metadata, "
            "batch_pk, created_at) SELECT p.value ->> 1, ?, item_key, item_hash, prompt_json, ?, ?, "
            f"?, ? FROM json_each(?) p JOIN {SCHEMA}.pairs s ON s.seq = p.value ->> 0 ORDER BY p.key"
        )
        candidates = (
            "INSERT OR ROLLBACK INTO candidates (item_pk, candidate_key, position, text, source, metadata) "
            "SELECT p.value ->> 1, iif(position, key1, key0), position, iif(position, text1, text0), "
            f"'model', ? FROM json_each(?) p JOIN {SCHEMA}.pairs s ON s.seq = p.value ->> 0 "
            "CROSS JOIN (SELECT 0 AS position UNION ALL SELECT 1) ORDER BY p.key, position"
        )
        self.driver.execute(
            items,
            (same["project_pk"], same["domains"], same["metadata"], same["batch_pk"],
             same["created_at"], picked),
        )  # fmt: skip
        self.driver.execute(candidates, (same["candidate_metadata"], picked))

    def judgments(
        self, stage: Stage, seqs: Sequence[int], item_pks: Sequence[int], same: dict[str, Any]
    ) -> None:
        """The judgments (their raters exist: looked up by key; ``same``: project_pk, batch_pk,
        excluded, created_at)."""
        self.use(stage)
        columns = (
            "INSERT OR ROLLBACK INTO judgments (project_pk, item_pk, rater_pk, kind, body, pair_lo, pair_hi, "
            "score, shown_order, review_pass, source, content_hash, batch_pk, excluded, created_at) "
            "SELECT ?1, {item_pk}, (SELECT pk FROM main.raters r WHERE r.project_pk = ?1 AND "
            "r.rater_key = s.rater_key), 'pairwise', body_json, pair_lo, pair_hi, score, "
            "shown_order_json, 0, source, content_hash, ?3, ?4, ?5 "
        )
        # Judgments of items met before (in this chunk, an earlier one, or stored) have item
        # keys in no order: then each row's is given.
        segments = (
            _segments(seqs, item_pks)
            if all(a < b for a, b in zip(item_pks, item_pks[1:], strict=False))
            else None
        )
        if segments is None or len(segments) > MAX_SEGMENTS:
            self.driver.execute(
                columns.format(item_pk="p.value ->> 1")
                + f"FROM json_each(?2) p JOIN {SCHEMA}.pairs s ON s.seq = p.value ->> 0 "
                "ORDER BY p.key",
                (same["project_pk"], _picked(seqs, item_pks), same["batch_pk"], same["excluded"],
                 same["created_at"]),
            )  # fmt: skip
            return
        sql = columns.format(item_pk="seq + ?2") + (
            f"FROM {SCHEMA}.pairs s WHERE seq BETWEEN ?6 AND ?7 ORDER BY seq"
        )
        for lo, hi, delta in segments:
            self.driver.execute(
                sql,
                (same["project_pk"], delta, same["batch_pk"], same["excluded"], same["created_at"],
                 lo, hi),
            )  # fmt: skip
