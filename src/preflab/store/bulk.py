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
rollback), and before the commit :func:`check_added` looks up, for every foreign key of every
table, the rows added since the transaction began (primary keys above the maximum it found
at the start): one pass for the keys that hold one value in all of them (a bulk write's project
and batch: looked up once), one statement for each other key — the index lookups SQLite would
have made row by row (1.9 s of CPU at 1M comparisons, against ~4 s of statement journal).
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


def check_added(session: Session, before: dict[str, int]) -> None:
    """Every foreign key of the rows added since ``before`` (:func:`max_pks`) points at a row."""
    for table in _checked_tables():
        pk = next(iter(table.primary_key.columns)).name
        since = {"before": before.get(table.name, 0)}
        fks = sorted(table.foreign_keys, key=lambda f: f.parent.name)
        # one pass over the added rows: the columns that hold a single value (a bulk write's
        # project, batch) are checked by that value; the others row by row
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
            where = f'p."{parent.name}" = t."{col}"'
            if lo == hi:  # one value: look it up once
                missing = session.execute(
                    text(
                        f'SELECT count(*) = 0 FROM "{parent.table.name}" p '
                        f'WHERE p."{parent.name}" = :value'
                    ),
                    {"value": lo},
                ).scalar_one()
            else:
                missing = session.execute(
                    text(
                        f'SELECT count(*) FROM "{table.name}" t WHERE t."{pk}" > :before '
                        f'AND t."{col}" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM '
                        f'"{parent.table.name}" p WHERE {where})'
                    ),
                    since,
                ).scalar_one()
            if missing:
                raise ForeignKeyViolation(
                    f"{missing} new row(s) of {table.name}.{col} point at no "
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
