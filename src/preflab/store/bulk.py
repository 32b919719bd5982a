"""A bulk write's transaction: on SQLite, foreign keys checked once for the rows it added.

SQLite checks an immediate foreign key per row, and a statement that may fail a constraint
midway keeps a *statement journal* so that it alone can be undone: a copy of every page it
changes that the transaction changed before. An import moves each chunk of rows with one
``INSERT ... SELECT`` per table into tables whose indexes (item key, content hash) the earlier
chunks touched all over, so that journal copied ~322 MB at 200k comparisons and 8.5 GB of
writes at 1M, ~20 % of the writer's CPU (issue 10, measured with ``strace`` and
``/proc/self/io``). ``PRAGMA defer_foreign_keys`` does not avoid it: SQLite decides at compile
time.

So a bulk write runs with ``foreign_keys`` off on its own connection, its moves use
``INSERT OR ROLLBACK`` (a conflict ends the whole transaction: nothing needs a statement
rollback), and before the commit :func:`check_added` checks every foreign key of the rows
added since the transaction began (primary keys above the maximum it found at the start),
mostly without a lookup: a key that points among the rows the same
write added is proved by its range (those rows' keys have no gap), a key that holds one value
in all of them (a bulk write's project and batch) is looked up once, and only keys at older
rows are looked up row by row — 0.65 s of CPU at 1M comparisons, where the row-by-row lookups
SQLite would have made cost 1.5 s and the statement journal ~4 s.
A violation raises :class:`ForeignKeyViolation` and the transaction rolls back — nothing is
half-written. The connection leaves with ``foreign_keys`` on again, or is discarded.

PostgreSQL (``COPY``) and every other writer keep their per-row checks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, Table, text
from sqlalchemy.orm import Session

from .db import session_factory, transaction
from .models import Base


class ForeignKeyViolation(Exception):
    """Rows a bulk write added point at rows that do not exist (a bug: nothing is committed)."""


def _checked_tables() -> list[Table]:
    from . import server_models  # noqa: F401  # the server's tables are in the metadata too

    return [
        t for t in Base.metadata.sorted_tables if t.foreign_keys and len(t.primary_key.columns) == 1
    ]


def max_pks(session: Session) -> dict[str, int]:
    """The largest primary key of every table with foreign keys (0 when empty)."""
    out = {}
    for table in _checked_tables():
        pk = next(iter(table.primary_key.columns)).name
        out[table.name] = session.execute(
            text(f'SELECT coalesce(max("{pk}"), 0) FROM "{table.name}"')
        ).scalar_one()
    return out


def _dense_above(session: Session, table: Table, before: int) -> int | None:
    """The largest primary key of ``table`` if every key in ``(before, largest]`` exists (the
    rows a bulk write added, keys allocated one after another), else ``None``."""
    pk = next(iter(table.primary_key.columns)).name
    count, top = session.execute(
        text(f'SELECT count(*), max("{pk}") FROM "{table.name}" WHERE "{pk}" > :before'),
        {"before": before},
    ).one()
    if not count:
        return before
    return int(top) if top - before == count else None


def check_added(session: Session, before: dict[str, int]) -> None:
    """Every foreign key of the rows added since ``before`` (:func:`max_pks`) points at a row.

    One pass over each table's added rows finds each key column's smallest and largest value.
    When the parent's rows added by the write have no gap in their primary keys
    (:func:`_dense_above`, once per parent) and the column's values all lie among them, every
    key points at a row and nothing is looked up (a bulk import's candidates and judgments). A
    column holding one value (the project, the batch) is looked up once. Otherwise a second
    pass looks up the values at older rows and counts those past the last.
    """
    checked = {t.name: t for t in _checked_tables()}
    dense: dict[str, int | None] = {}
    for table in checked.values():
        pk = next(iter(table.primary_key.columns)).name
        since = {"before": before.get(table.name, 0)}
        fks = sorted(table.foreign_keys, key=lambda f: f.parent.name)
        spans = session.execute(
            text(
                "SELECT "
                + ", ".join(f'min("{f.parent.name}"), max("{f.parent.name}")' for f in fks)
                + f' FROM "{table.name}" WHERE "{pk}" > :before'
            ),
            since,
        ).one()
        for i, fk in enumerate(fks):
            col, parent = fk.parent.name, fk.column
            lo, hi = spans[2 * i], spans[2 * i + 1]
            if lo is None:  # no rows added, or the column is NULL in all of them
                continue
            lookup = f'SELECT 1 FROM "{parent.table.name}" p WHERE p."{parent.name}" = '
            if lo == hi:  # one value: looked up once
                if session.execute(text(lookup + ":value"), {"value": lo}).first() is None:
                    _violation(table.name, col, parent, 1)
                continue
            floor, top = before.get(parent.table.name), None
            if parent.primary_key and floor is not None and parent.table.name in checked:
                if parent.table.name not in dense:
                    dense[parent.table.name] = _dense_above(session, parent.table, floor)
                top = dense[parent.table.name]
            if top is not None and floor is not None and floor < lo and hi <= top:
                continue  # all among the added rows, which have no gap
            # (CASE, not AND / OR: SQLite evaluates both sides of those outside a WHERE)
            v = f't."{col}"'
            test = f"WHEN NOT EXISTS ({lookup}{v}) THEN 1"
            if top is not None:
                test = f"WHEN {v} > :top THEN 1 WHEN {v} > :floor THEN 0 {test}"
            missing = session.execute(
                text(
                    f"SELECT sum(CASE WHEN {v} IS NULL THEN 0 {test} ELSE 0 END) "
                    f'FROM "{table.name}" t WHERE t."{pk}" > :before'
                ),
                {**since, "floor": floor, "top": top},
            ).scalar_one()
            if missing:
                _violation(table.name, col, parent, missing)


def _violation(table: str, col: str, parent: Any, count: int) -> None:
    raise ForeignKeyViolation(
        f"{count} new row(s) of {table}.{col} point at no "
        f"{parent.table.name}.{parent.name}; nothing was written"
    )


@contextmanager
def bulk_transaction(engine: Engine) -> Iterator[Session]:
    """:func:`preflab.store.db.transaction` for a bulk write (see the module doc)."""
    if engine.dialect.name != "sqlite":
        with transaction(engine) as session:
            yield session
        return
    with engine.connect() as conn:
        driver: Any = conn.connection.driver_connection
        driver.execute("PRAGMA foreign_keys=OFF")  # before the transaction: inside, a no-op
        try:
            with session_factory(engine)(bind=conn) as session, session.begin():
                before = max_pks(session)
                yield session
                check_added(session, before)
        finally:
            try:
                driver.execute("PRAGMA foreign_keys=ON")
                restored = driver.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            except sqlite3.Error:
                restored = False
            if not restored:  # never back to the pool with the checks off
                conn.invalidate()
