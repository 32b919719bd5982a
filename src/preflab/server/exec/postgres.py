"""The PostgreSQL executor: psycopg, one transaction a request, few round trips, locks last.

One connection per server process, used on the event loop thread like the SQLite lane's (each
request is a handful of local round trips). Set on the connection, for the lane's statements
only:

* ``prepare_threshold=0``: psycopg prepares each statement on its first use (server-side
  prepared statements, one per statement text and connection), and
  ``plan_cache_mode=force_generic_plan``: PostgreSQL plans each prepared statement once and
  reuses that plan (it otherwise re-plans every execution with custom plans: issue 10 measured
  0.81 ms planning vs 0.074 ms executing for the submit's lease query);
* ``lock_timeout``: a row lock held elsewhere (the framework path in a worker thread, another
  host) is waited for at most this long on the event loop, then the request goes to the
  framework, which waits in a thread;
* a dead connection (server restart, idle kill) is not pinged before use: the failing request
  goes to the framework (which redoes it) and the next one reconnects.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy.dialects import postgresql as pg_dialect

from . import Busy

DIALECT = pg_dialect.dialect(paramstyle="format")
LOCK_TIMEOUT_MS = 100
OPTIONS = f"-c plan_cache_mode=force_generic_plan -c lock_timeout={LOCK_TIMEOUT_MS}"


def conninfo(sqlalchemy_url) -> str:  # noqa: ANN001
    """The libpq connection string of a SQLAlchemy URL (``postgresql+psycopg://...``)."""
    return sqlalchemy_url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgExecutor:
    is_pg = True
    dialect = DIALECT
    mark = "%s"
    errors = (psycopg.Error,)

    def __init__(self, url) -> None:  # noqa: ANN001
        self.info = conninfo(url)
        self.conn: psycopg.Connection | None = None
        self.lock = threading.Lock()  # one request at a time on the connection

    def _connection(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            try:
                self.conn = psycopg.connect(self.info, autocommit=False, prepare_threshold=0, options=OPTIONS)
            except psycopg.Error as exc:
                raise Busy(f"connect: {type(exc).__name__}") from None
        return self.conn

    # -- values: psycopg adapts datetimes itself; JSONB is bound as Jsonb and read parsed -------
    @staticmethod
    def dt(value: datetime) -> datetime:
        return value

    @staticmethod
    def json(value: Any) -> Jsonb:  # noqa: ANN401
        return Jsonb(value)

    @staticmethod
    def load_json(value: Any) -> Any:  # noqa: ANN401
        return value

    @staticmethod
    def load_dt(value: datetime) -> datetime:
        return value

    @staticmethod
    def false() -> bool:
        return False

    # -- transactions (psycopg begins implicitly with the first statement) ----------------------
    def begin(self) -> psycopg.Cursor:
        if not self.lock.acquire(blocking=False):
            raise Busy("busy (this process)")
        try:
            return self._connection().cursor()
        except BaseException:
            self.lock.release()
            raise

    def commit(self, cur: psycopg.Cursor) -> None:
        self.conn.commit()

    def rollback(self, cur: psycopg.Cursor) -> None:
        try:
            self.conn.rollback()
        except psycopg.Error:  # a dead connection: drop it, the next request reconnects
            self.conn.close()

    def end(self) -> None:
        self.lock.release()

    @staticmethod
    def insert_returning_pk(cur: psycopg.Cursor, sql: str, args: list[Any]) -> int:
        return cur.execute(sql + " RETURNING pk", args).fetchone()[0]
