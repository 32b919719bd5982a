"""Executors: run the hot path's statements on one backend; they decide nothing.

An executor owns its connections and knows the backend's conventions (placeholders, how
datetimes and JSON are bound and read back, how a transaction starts and which errors mean
"hand the request to the framework"). It drives a flow of :mod:`preflab.server.flow.lane` (a
generator that yields each statement it needs and receives the result), so the decisions are
written once for both executors: SQLite's runs the flow synchronously on the event loop
(:func:`drive`), PostgreSQL's on psycopg's asynchronous connections.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
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


def answer(cur: Any, request: tuple, *, returning: bool) -> Any:
    """Run one statement a flow asked for (``ALL``, ``ONE``, ``EXEC``, ``STORE``:
    :mod:`preflab.server.flow.lane`) on a synchronous DBAPI cursor and give back what the flow
    receives. ``returning``: a ``STORE`` gives its new pk as a row (PostgreSQL's ``RETURNING``);
    else the cursor's ``lastrowid`` (SQLite), None when the statement's guard stopped it."""
    kind, sql, args = request
    cur.execute(sql, args)
    if kind == "all":
        return cur.fetchall()
    if kind == "one":
        return cur.fetchone()
    if kind == "exec":
        return None
    if returning:
        found = cur.fetchone()
        return found[0] if found is not None else None
    # trigger changes are not counted in rowcount: 1 is the judgment itself
    return cur.lastrowid if cur.rowcount == 1 else None


def drive(flow: Generator[tuple, Any, Any], step: Callable[[tuple], Any]) -> Any:
    """Run ``flow`` to its end, answering each request it yields with ``step(request)``; the
    flow's return value. An error of ``step`` closes the flow and comes out of here."""
    value = None
    try:
        while True:
            value = step(flow.send(value))
    except StopIteration as done:
        return done.value
    finally:
        flow.close()
