"""The server's view of the database: a read engine and a write engine.

SQLite: writes run in ``BEGIN IMMEDIATE`` transactions, so the assignment engine's
read-count-insert is serialised across threads *and* processes (the file lock), and a
reader never has to upgrade to a writer mid-transaction (the classic ``database is locked``).
PostgreSQL: READ COMMITTED; the assignment engine takes row locks (``FOR UPDATE [SKIP LOCKED]``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Table, event
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql import FromClause

from ..store import make_engine, normalise_url
from .errors import ServiceError

T = TypeVar("T")


def _autocommit_driver(dbapi_connection, _record) -> None:
    # pysqlite's own transaction handling would BEGIN lazily (DEFERRED); we emit BEGIN ourselves.
    dbapi_connection.isolation_level = None


class Database:
    """Engines and transaction helpers; holds no business state (safe with many workers)."""

    def __init__(self, url: str, *, pool_size: int = 20, max_overflow: int = 20) -> None:
        self.url = normalise_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        kwargs = {"pool_size": pool_size, "max_overflow": max_overflow, "pool_timeout": 60}
        if self.is_sqlite and ":memory:" in self.url:
            raise ValueError("the server needs a SQLite file (several connections), not :memory:")
        if not self.is_sqlite:
            # No ``SELECT 1`` before every checkout (a round trip a request): a connection found
            # dead invalidates the pool (SQLAlchemy recycles every older connection) and the
            # request is retried once (:func:`permissions.guard`, the first statement of each).
            kwargs["pool_pre_ping"] = False
        self.engine = make_engine(self.url, **kwargs)
        if self.is_sqlite:
            self.write_engine = make_engine(self.url, **kwargs)
            for engine, begin in ((self.engine, "BEGIN"), (self.write_engine, "BEGIN IMMEDIATE")):
                event.listen(engine, "connect", _autocommit_driver)
                event.listen(engine, "begin", lambda conn, _b=begin: conn.exec_driver_sql(_b))
        else:
            self.write_engine = self.engine
        # SQLite's busy handler sleeps and retries: many threads of one process contending for
        # the write lock form a convoy (seconds of p99). Queue them on a process lock instead;
        # the file lock + busy_timeout still serialise writers across processes.
        self.write_lock = threading.Lock() if self.is_sqlite else nullcontext()
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(self.write_engine, expire_on_commit=False)
        self._closers: list[Callable[[], None]] = []

    def on_dispose(self, close: Callable[[], None]) -> None:
        """Run ``close`` when the database is disposed (the fast lane's own connections)."""
        self._closers.append(close)

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A read-only unit of work (rolled back at the end)."""
        with self._read() as session:
            session.begin()
            try:
                yield session
            finally:
                session.rollback()

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A write transaction: commit on success, roll back on any error."""
        with self.write_lock, self._write() as session, session.begin():
            yield session

    # -- a Core connection for the guard's reads (a prebuilt Core statement costs a few tens of
    # µs; the ORM ~1 ms of CPU a statement). The hot writes run on the fast lane's executors.

    @contextmanager
    def read_conn(self) -> Iterator[Connection]:
        """A Core connection for a few reads (rolled back at the end)."""
        with self.engine.connect() as conn:
            yield conn

    def dispose(self) -> None:
        while self._closers:
            self._closers.pop()()
        self.engine.dispose()
        if self.write_engine is not self.engine:
            self.write_engine.dispose()


def insert_ignore(
    session: Session, table: FromClause, rows: list[dict[str, Any]], index: list[str]
) -> None:
    """INSERT ... ON CONFLICT DO NOTHING on both SQLite and PostgreSQL (idempotent, race-safe).
    ``table``: a model's ``__table__`` (typed as a ``FromClause``, always a ``Table``)."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    ins = (pg_insert if dialect == "postgresql" else sqlite_insert)(cast(Table, table))
    session.execute(ins.on_conflict_do_nothing(index_elements=index), rows)


def must_get(session: Session, model: type[T], pk: Any) -> T:
    """``session.get`` of a row that must exist (a key read from another row points to it): a
    missing one is a :class:`~preflab.server.errors.ServiceError` 404 naming the table and key
    (a row deleted meanwhile), never an ``AttributeError`` on ``None``."""
    found = session.get(model, pk)
    if found is None:
        table = getattr(model, "__tablename__", model.__name__)
        raise ServiceError(404, f"no {table} row {pk} (deleted meanwhile?)")
    return found


def init_schema(url: str) -> None:
    """Bring the schema to the newest Alembic revision (``0002_server`` adds the server tables)."""
    from ..store.db import open_db

    open_db(url).dispose()
