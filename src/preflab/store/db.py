"""Engines and sessions: SQLite (WAL, foreign keys on) by default, PostgreSQL by URL."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from ..settings import get_settings

if TYPE_CHECKING:
    import sqlite3

    from alembic.config import Config
    from sqlalchemy.engine.interfaces import DBAPIConnection

log = logging.getLogger(__name__)


def default_url() -> str:
    """``$PREFLAB_DB`` if set, else ``sqlite:///preflab.db`` in the working directory."""
    return get_settings().db


def normalise_url(url: str) -> str:
    """Accept a bare path as a SQLite file, and plain ``postgresql://`` as psycopg 3."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


#: Page size of a new SQLite database (bytes; an existing file keeps its own). 4096 is SQLite's
#: default and the right one for the collection server: every small transaction writes whole
#: pages to the WAL, and 16 KiB pages cost a fetch+submit cycle ~20% more CPU (measured with
#: ``benchmarks/profile_cycle.py``). A store used mostly for bulk imports of long texts may set
#: ``$PREFLAB_SQLITE_PAGE_SIZE`` (e.g. 16384) before the file is created: fewer page splits.
#: Read when a connection opens (:mod:`preflab.settings`), not at import time.


def _sqlite_pragmas(
    dbapi_connection: DBAPIConnection | sqlite3.Connection, _record: object
) -> None:
    """The connection settings of every SQLite connection: the engine's ("connect" event) and
    the fast lane's own (:mod:`preflab.server.fastlane`, a plain ``sqlite3`` connection)."""
    cursor = dbapi_connection.cursor()
    # Only takes effect on a database that has no tables yet, so it must come first.
    cursor.execute(f"PRAGMA page_size={get_settings().sqlite_page_size}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _json_dumps(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    url = normalise_url(url or default_url())
    # orjson for JSON columns: several times faster than json.dumps on bulk imports.
    kwargs.setdefault("json_serializer", _json_dumps)
    kwargs.setdefault("json_deserializer", orjson.loads)
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


# -- schema migrations (Alembic, run programmatically) -----------------------------------

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic ``Config`` pointing at the migrations shipped inside the package."""
    from alembic.config import Config

    # stdout given at call time: Alembic's default is the sys.stdout of the moment alembic was
    # first imported, which is a closed stream if that happened inside a captured CLI run
    config = Config(stdout=sys.stdout)
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _as_engine(engine_or_url: Engine | str) -> tuple[Engine, bool]:
    if isinstance(engine_or_url, Engine):
        return engine_or_url, False
    return make_engine(engine_or_url), True


def upgrade(engine_or_url: Engine | str, revision: str = "head") -> None:
    """Bring the schema up to ``revision`` (default: the newest)."""
    _run(engine_or_url, "upgrade", revision)


def downgrade(engine_or_url: Engine | str, revision: str = "base") -> None:
    """Take the schema down to ``revision`` (``"base"``: no tables at all)."""
    _run(engine_or_url, "downgrade", revision)


def _run(engine_or_url: Engine | str, direction: str, revision: str) -> None:
    from alembic import command

    engine, owned = _as_engine(engine_or_url)
    try:
        with engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            getattr(command, direction)(config, revision)
        log.info(
            "schema %s to %s",
            direction,
            revision,
            extra={"database": engine.url.render_as_string(hide_password=True)},
        )
    finally:
        if owned:
            engine.dispose()


def current_revision(engine: Engine | str) -> str | None:
    """The schema's Alembic revision, or ``None`` for an empty (or pre-Alembic) database."""
    from alembic.runtime.migration import MigrationContext

    engine, owned = _as_engine(engine)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        if owned:
            engine.dispose()


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def open_db(url: str | None = None, **kwargs: Any) -> Engine:
    """An engine on ``url`` (default :func:`default_url`) whose schema is at the newest revision."""
    engine = make_engine(url, **kwargs)
    if current_revision(engine) != head_revision():
        upgrade(engine)
    return engine
