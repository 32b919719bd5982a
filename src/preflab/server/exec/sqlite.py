"""The SQLite executor: one connection of the lane's own, never waiting for a lock.

The lane only ever *tries* the locks: if another thread of this process (the app's write
lock) or another process (SQLite's file lock, ``busy_timeout`` 0 on this connection) is
writing, :class:`Busy` sends the request to the framework, which waits its turn.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Dialect

from ...store.models import ItemRow
from ..flow.common import NotCommon, aware
from ..flow.lane import BEGIN, Flow
from . import Busy, answer, drive

DIALECT = sqlite_dialect.dialect(paramstyle="qmark")


def _datetime_binder() -> Callable[[datetime | None], Any]:
    """SQLAlchemy's SQLite ``DateTime`` bind processor (a datetime as the ISO text it stores)."""
    process = ItemRow.__table__.c.created_at.type.dialect_impl(DIALECT).bind_processor(DIALECT)
    assert process is not None  # SQLite's DateTime stores text: it always has a bind processor
    return process


_DT = _datetime_binder()


def _dumps(value: Any) -> str:
    """JSON columns as the engine writes them (``preflab.store.db``: orjson, non-str keys)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


class SqliteExecutor:
    is_pg = False
    dialect: Dialect = DIALECT
    mark = "?"
    errors = (sqlite3.Error,)

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock) -> None:
        self.conn, self.lock = conn, lock
        self.rubrics: dict = {}

    def close(self) -> None:
        self.conn.close()

    # -- values as SQLAlchemy's SQLite types bind and return them ----------------------------
    @staticmethod
    def dt(value: datetime) -> str:
        return _DT(value)

    @staticmethod
    def json(value: Any) -> str:
        return _dumps(value)

    @staticmethod
    def load_json(value: str | None) -> Any:
        return orjson.loads(value) if value is not None else None

    @staticmethod
    def load_dt(value: str) -> datetime:
        return aware(datetime.fromisoformat(value))

    @staticmethod
    def false() -> int:
        return 0

    # -- running a flow ------------------------------------------------------------------------
    def run(self, flow: Flow) -> Any:
        """Run ``flow`` (:mod:`preflab.server.flow.lane`) on the lane's connection, under this
        process's write lock, and commit; rolled back on any error (``Busy``: the lock was
        taken). Synchronous: a few hundred µs of local work, on the event loop."""
        cur = self.begin()
        try:
            out = drive(flow, lambda request: self.step(cur, request))
            self.commit(cur)
        except BaseException:
            self.rollback(cur)
            raise
        finally:
            self.end(cur)
        return out

    def step(self, cur: sqlite3.Cursor, request: tuple) -> Any:
        """Answer one request of a flow."""
        if request[0] == BEGIN:
            return self.start_transaction(cur)
        return answer(cur, request, returning=False)

    # -- transactions --------------------------------------------------------------------------
    def begin(self) -> sqlite3.Cursor:
        """This process's write lock, no transaction yet: "next" starts one
        (:meth:`start_transaction`); "submit" reads, then writes in one guarded statement that
        is its own transaction (autocommit, ``sql.guarded_store``)."""
        if not self.lock.acquire(blocking=False):
            raise Busy("busy (this process)")
        return self.conn.cursor()

    @staticmethod
    def start_transaction(cur: sqlite3.Cursor) -> None:
        """``BEGIN IMMEDIATE``: the write lock at once, or the framework (another process
        writes; ``busy_timeout`` is 0 on this connection)."""
        try:
            cur.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            raise NotCommon("busy (another process)") from None

    @staticmethod
    def in_transaction(cur: sqlite3.Cursor) -> bool:
        return cur.connection.in_transaction

    def commit(self, cur: sqlite3.Cursor) -> None:
        if cur.connection.in_transaction:
            cur.execute("COMMIT")

    def rollback(self, cur: sqlite3.Cursor) -> None:
        if not cur.connection.in_transaction:
            return
        try:
            cur.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def end(self, cur: sqlite3.Cursor) -> None:
        self.lock.release()
