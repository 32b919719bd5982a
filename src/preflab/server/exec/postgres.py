"""The PostgreSQL executor: psycopg, one transaction a request, few round trips, locks last.

A small pool of connections per server process; the lane runs a PostgreSQL request in a
worker thread (psycopg releases the GIL while it waits on the network, so several requests are
in flight per process while the event loop keeps parsing). Set on each connection, for the
lane's statements only:

* ``prepare_threshold=0``: psycopg prepares each statement on its first use (server-side
  prepared statements, one per statement text and connection), and
  ``plan_cache_mode=force_generic_plan``: PostgreSQL plans each prepared statement once and
  reuses that plan (it otherwise re-plans every execution with custom plans: issue 10 measured
  0.81 ms planning vs 0.074 ms executing for the submit's lease query), and
  ``enable_seqscan=off``: a generic plan is made once, with the table sizes of that moment, and
  on a table of a page or two a sequential scan is the cheapest lookup even by primary key; that
  plan then stays while the table grows (measured: the submit's guard scanned every lease of the
  project, 0.43 ms a submit at 5,000 leases against 0.10 ms through the index). Every lane
  statement has an index to use, so the setting only removes the trap;
* ``lock_timeout``: a row lock held elsewhere (the framework path in a worker thread, another
  host) is waited for at most this long on the event loop, then the request goes to the
  framework, which waits in a thread;
* a dead connection (server restart, idle kill) is not pinged before use: the failing request
  goes to the framework (which redoes it) and the next one reconnects.
"""

from __future__ import annotations

import queue
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import URL

from . import Busy

DIALECT = pg_dialect.dialect(paramstyle="format")
LOCK_TIMEOUT_MS = 100
#: How the lane's connections show in ``pg_stat_activity``.
APPLICATION_NAME = "preflab-lane"
#: Connections per process; a request finding none free waits for one. Four, not eight: at 200
#: raters on 2 cores, 2 workers x 8 lane transactions in flight cost ~10 % more CPU a cycle
#: (mostly PostgreSQL's: more backends, more lock traffic) for less throughput (issue 10).
POOL_SIZE = 4
OPTIONS = (
    f"-c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c lock_timeout={LOCK_TIMEOUT_MS}"
)


def conninfo(sqlalchemy_url: URL) -> str:
    """The libpq connection string of a SQLAlchemy URL (``postgresql+psycopg://...``)."""
    return sqlalchemy_url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgExecutor:
    is_pg = True
    dialect = DIALECT
    mark = "%s"
    errors = (psycopg.Error,)

    def __init__(self, url: URL, pool_size: int = POOL_SIZE) -> None:
        self.info, self.pool_size = conninfo(url), pool_size
        self.idle: queue.LifoQueue[psycopg.Connection] = queue.LifoQueue()
        self.free = queue.Queue()  # one token per connection not yet opened
        for _ in range(pool_size):
            self.free.put(None)

    def _connection(self) -> psycopg.Connection:
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            pass
        try:
            self.free.get_nowait()
        except queue.Empty:
            raise Busy("busy (every lane connection in use)") from None
        try:
            return psycopg.connect(
                self.info,
                autocommit=True,
                prepare_threshold=0,
                options=OPTIONS,
                application_name=APPLICATION_NAME,
            )
        except psycopg.Error as exc:
            self.free.put(None)
            raise Busy(f"connect: {type(exc).__name__}") from None

    def close(self) -> None:
        """Close the idle connections (the app's shutdown; requests in flight have ended)."""
        while True:
            try:
                conn = self.idle.get_nowait()
            except queue.Empty:
                return
            conn.close()
            self.free.put(None)

    # -- values: psycopg adapts datetimes itself; JSONB is bound as Jsonb and read parsed -------
    @staticmethod
    def dt(value: datetime) -> datetime:
        return value

    @staticmethod
    def json(value: Any) -> Jsonb:
        return Jsonb(value)

    @staticmethod
    def load_json(value: Any) -> Any:
        return value

    @staticmethod
    def load_dt(value: datetime) -> datetime:
        return value

    @staticmethod
    def false() -> bool:
        return False

    # -- transactions ---------------------------------------------------------------------------
    # Autocommit connections: psycopg would otherwise send BEGIN as a round trip of its own
    # before the first statement. A request that needs locks across statements ("next") opens
    # its transaction explicitly; a single-statement write ("submit"'s store) needs none.
    def begin(self) -> psycopg.Cursor:
        return self._connection().cursor()

    @staticmethod
    def start_transaction(cur: psycopg.Cursor) -> None:
        cur.execute("BEGIN", prepare=False)

    @staticmethod
    def in_transaction(cur: psycopg.Cursor) -> bool:
        return cur.connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def commit(self, cur: psycopg.Cursor) -> None:
        cur.connection.commit()

    def rollback(self, cur: psycopg.Cursor) -> None:
        try:
            cur.connection.rollback()
        except psycopg.Error:  # a dead connection: drop it, the next request opens a new one
            cur.connection.close()

    def end(self, cur: psycopg.Cursor) -> None:
        """Give the connection back (a closed one frees its place for a new connection)."""
        conn = cur.connection
        cur.close()
        if conn.closed or conn.broken:
            self.free.put(None)
        else:
            self.idle.put(conn)
