"""Executors: run the hot path's statements on one backend; they decide nothing.

An executor owns a DBAPI connection and knows the backend's conventions (placeholders, how
datetimes and JSON are bound and read back, how a transaction starts and which errors mean
"hand the request to the framework"). The decisions stay in :mod:`preflab.server.fastlane`
(and the engine modules it calls), written once for both executors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Busy(Exception):
    """The executor could not start or finish its transaction now (lock held, connection lost);
    the caller hands the request to the framework path, which waits its turn or reconnects."""


class TracingCursor:
    """A cursor that reports every statement to ``trace`` (profiling: statements a cycle)."""

    __slots__ = ("_cur", "_trace")

    def __init__(self, cur: Any, trace: Callable[[str], None]) -> None:
        self._cur, self._trace = cur, trace

    def execute(self, sql: str, args: Any = None, **kw: Any) -> TracingCursor:
        self._trace(sql)
        if args is None:  # sqlite3 refuses None for "no parameters"
            self._cur.execute(sql, **kw)
        else:
            self._cur.execute(sql, args, **kw)
        return self

    @property
    def connection(self) -> Any:
        return self._cur.connection

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self):
        return iter(self._cur.fetchall())

    @property
    def lastrowid(self) -> int:
        return self._cur.lastrowid

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount
