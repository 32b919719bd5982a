"""The PostgreSQL executor: psycopg, one transaction a request, few round trips, locks last.

A small pool of psycopg's *asynchronous* connections per server process: the lane runs a
PostgreSQL request on the event loop, and each round trip awaits its socket, so several requests
are in flight per process without a worker thread (a thread hop cost ~0.35 ms of CPU a cycle,
profiled: the GIL handed between the loop and the worker on every round trip). Set on each
connection, for the lane's statements only:

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
  host) is waited for at most this long, then the request goes to the framework, which waits
  in a thread;
* a dead connection (server restart, idle kill) is not pinged before use: the failing request
  goes to the framework (which redoes it) and the next one reconnects.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb, set_json_dumps, set_json_loads
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import URL, Dialect

from ..flow.lane import ALL, BEGIN, EXEC, ONE, Flow
from . import Busy

DIALECT = pg_dialect.dialect(paramstyle="format")
LOCK_TIMEOUT_MS = 100
#: How the lane's connections show in ``pg_stat_activity``.
APPLICATION_NAME = "preflab-lane"
#: Connections per process; a request finding none free waits for one. Two: more transactions
#: in flight cost PostgreSQL more CPU a cycle (more backends, more lock traffic) than they gain
#: (issue 10, 200 raters, 2 cores, interleaved runs: 2 workers 910/924 cycles/s with two
#: against 834/761 with four; 4 workers 845/835 against 712/639).
POOL_SIZE = 2
OPTIONS = (
    f"-c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c lock_timeout={LOCK_TIMEOUT_MS}"
)


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def conninfo(sqlalchemy_url: URL) -> str:
    """The libpq connection string of a SQLAlchemy URL (``postgresql+psycopg://...``)."""
    return sqlalchemy_url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgExecutor:
    is_pg = True
    dialect: Dialect = DIALECT
    mark = "%s"
    errors = (psycopg.Error,)

    def __init__(
        self, url: URL, pool_size: int = POOL_SIZE, trace: Callable[[str], None] | None = None
    ) -> None:
        self.info, self.pool_size, self.trace = conninfo(url), pool_size, trace
        self.idle: list[psycopg.AsyncConnection] = []  # last in, first out: warm ones first
        self.opened = 0
        self.rubrics: dict = {}

    async def _connection(self) -> psycopg.AsyncConnection:
        if self.idle:
            return self.idle.pop()
        if self.opened >= self.pool_size:
            raise Busy("busy (every lane connection in use)")
        self.opened += 1
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.info,
                autocommit=True,
                prepare_threshold=0,
                options=OPTIONS,
                application_name=APPLICATION_NAME,
            )
        except psycopg.Error as exc:
            self.opened -= 1
            raise Busy(f"connect: {type(exc).__name__}") from None
        # JSONB through orjson, as the rest of preflab (psycopg's default is the json module)
        set_json_loads(orjson.loads, conn)
        set_json_dumps(_dumps, conn)
        return conn

    def _give_back(self, conn: psycopg.AsyncConnection) -> None:
        """Back to the pool; a closed or broken one frees its place for a new connection."""
        if conn.closed or conn.broken:
            self.opened -= 1
            conn.pgconn.finish()
        else:
            self.idle.append(conn)

    def close(self) -> None:
        """Close the idle connections (the app's shutdown; requests in flight have ended).
        Synchronous, from ``Database.dispose``: libpq's own close, no round trip needed."""
        while self.idle:
            self.idle.pop().pgconn.finish()
            self.opened -= 1

    # -- running a flow ------------------------------------------------------------------------
    async def run(self, flow: Flow) -> Any:
        """Run ``flow`` (:mod:`preflab.server.flow.lane`) on a pooled connection, awaiting each
        round trip, and commit; rolled back on any error (``Busy``: no connection free)."""
        conn = await self._connection()
        cur = conn.cursor()
        try:
            value = None
            try:
                while True:
                    value = await self._step(cur, flow.send(value))
            except StopIteration as done:
                out = done.value
            finally:
                flow.close()
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                if self.trace is not None:
                    self.trace("COMMIT")
                await conn.commit()
        except BaseException:
            try:
                await conn.rollback()
            except psycopg.Error:  # a dead connection: dropped, the next request opens one
                conn.pgconn.finish()
            self._give_back(conn)
            raise
        self._give_back(conn)
        return out

    async def _step(self, cur: psycopg.AsyncCursor, request: tuple) -> Any:
        """Answer one request of a flow (one round trip)."""
        kind = request[0]
        if kind == BEGIN:
            sql, args, prepare = "BEGIN", None, False
        else:
            sql, args, prepare = request[1], request[2], None
        if self.trace is not None:
            self.trace(sql)
        await cur.execute(sql, args, prepare=prepare)
        if kind == ALL:
            return await cur.fetchall()
        if kind == ONE:
            return await cur.fetchone()
        if kind == EXEC or kind == BEGIN:
            return None
        found = await cur.fetchone()  # STORE: the new pk (RETURNING), none if the guard stopped it
        return found[0] if found is not None else None

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
