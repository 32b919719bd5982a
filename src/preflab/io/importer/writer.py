"""Bulk inserts of finished rows: raw ``executemany`` on SQLite, ``COPY`` on PostgreSQL."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import Connection, Table, func, select, text

from ...store.models import CandidateRow, ItemAlias, ItemRow, JudgmentRow, Rater
from .columns import CandidateColumns, ItemColumns, JudgmentColumns

ITEMS: Table = ItemRow.__table__  # type: ignore[assignment]
CANDIDATES: Table = CandidateRow.__table__  # type: ignore[assignment]
JUDGMENTS: Table = JudgmentRow.__table__  # type: ignore[assignment]
RATERS: Table = Rater.__table__  # type: ignore[assignment]
ALIASES: Table = ItemAlias.__table__  # type: ignore[assignment]

ITEM_COLUMNS = ItemColumns._fields
CANDIDATE_COLUMNS = CandidateColumns._fields
JUDGMENT_COLUMNS = JudgmentColumns._fields


class Writer:
    """Bulk inserts: raw ``executemany`` on SQLite, ``COPY ... FROM STDIN`` on PostgreSQL.

    Both take the same rows: JSON columns as JSON text (:meth:`json`), which SQLite stores as it
    is and PostgreSQL's ``COPY`` parses into ``jsonb`` (an ``INSERT`` of the text would store a
    JSON string instead).
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect
        self.sqlite = conn.dialect.name == "sqlite"
        if not self.sqlite and (conn.dialect.name, conn.dialect.driver) != (
            "postgresql",
            "psycopg",
        ):
            raise ValueError(
                f"bulk import supports SQLite and PostgreSQL through psycopg, not "
                f"{conn.dialect.name}+{conn.dialect.driver}; use a postgresql+psycopg:// URL"
            )
        #: SQLite's text form of a timestamp; PostgreSQL's COPY takes the datetime itself
        self._datetime_proc = (
            JUDGMENTS.c.started_at.type.dialect_impl(self.dialect).bind_processor(self.dialect)
            if self.sqlite
            else None
        )
        self._sql: dict[
            tuple[str, tuple[str, ...], tuple[str, ...]],
            tuple[str, list[tuple[int, Any]]],
        ] = {}

    def _prepare(
        self, table: Table, columns: tuple[str, ...], constants: tuple[str, ...]
    ) -> tuple[str, list[tuple[int, Any]]]:
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
            self.conn.exec_driver_sql(sql, rows)
        else:
            self._copy(table, columns, rows)

    def _copy(self, table: Table, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """``COPY`` the rows in on this transaction's own psycopg connection (text format: the
        server parses each value as its column's type, JSON text into ``jsonb``)."""
        driver = self.conn.connection.driver_connection
        assert driver is not None
        statement = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            write_row = copy.write_row
            for row in rows:
                write_row(row)

    def json(self, value: Any) -> Any:
        """A JSON column value ready for :meth:`insert` with ``processed=True``: its JSON text."""
        if value is None:
            return value
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()

    def constant(self, table: Table, column: str, value: Any) -> Any:
        """A value bound once for every row (SQLite: processed here, not per row)."""
        if not self.sqlite:
            return value
        proc = table.c[column].type.dialect_impl(self.dialect).bind_processor(self.dialect)
        return proc(value) if proc else value

    def datetime(self, value: Any) -> Any:
        if value is None or self._datetime_proc is None:
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
