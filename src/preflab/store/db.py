"""Engines and sessions: SQLite (WAL, foreign keys on) by default, PostgreSQL by URL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_DB_ENV = "PREFLAB_DB"


def default_url() -> str:
    """``$PREFLAB_DB`` if set, else ``sqlite:///preflab.db`` in the working directory."""
    return os.environ.get(DEFAULT_DB_ENV) or "sqlite:///preflab.db"


def normalise_url(url: str) -> str:
    """Accept a bare path as a SQLite file, and plain ``postgresql://`` as psycopg 3."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str | None = None, **kwargs) -> Engine:  # noqa: ANN003
    url = normalise_url(url or default_url())
    if url.startswith("sqlite"):
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, roll back everything on any error."""
    with session_factory(engine)() as session, session.begin():
        yield session
