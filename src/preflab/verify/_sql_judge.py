"""The SQL verifier's query half: one query on a read-only copy of the fixture.

It runs inside a judge worker (:mod:`preflab.verify.worker`), which loads this file by its path:
absolute imports only, nothing from ``preflab``. The worker is killed past the deadline (plus a
grace) and its address space is capped; inside it, SQLite's own limits make most hostile queries
fail at once with a clear message instead:

* ``SQLITE_LIMIT_LENGTH`` (:data:`MAX_VALUE_BYTES`): no string or blob larger than that
  (``randomblob``, ``zeroblob``, ``printf('%.*c', ...)``, ``replace`` and ``||`` amplification);
* ``PRAGMA hard_heap_limit`` (:data:`HEAP_LIMIT_BYTES`): all of SQLite's memory in the worker;
  temporary tables and sorts are kept in that memory (``temp_store = MEMORY``), not on disk;
* ``SQLITE_LIMIT_SQL_LENGTH`` (:data:`MAX_SQL_BYTES`) for the query text;
* the progress handler: a query stopped between two VM steps at the deadline ("interrupted").

What the handler cannot stop (one long function call) the kill does. The connection is opened
``mode=ro`` with ``PRAGMA query_only``; the authorizer refuses ``ATTACH``, pragmas and every
statement but ``SELECT``/``WITH``.
"""

from __future__ import annotations

import sqlite3
import time

MAX_VALUE_BYTES = 16 * 1024 * 1024
HEAP_LIMIT_BYTES = 256 * 1024 * 1024
MAX_SQL_BYTES = 1024 * 1024
ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}


def authorize(action, arg1, arg2, db_name, trigger):
    return sqlite3.SQLITE_OK if action in ALLOWED else sqlite3.SQLITE_DENY


def normal(value):
    return round(value, 9) if isinstance(value, float) else value


def warm_up() -> None:
    sqlite3.connect(":memory:").close()


def run(job: dict) -> dict:
    """``{"rows": [...]}`` (at most ``max_rows``), or ``{"error": "..."}`` from SQLite."""
    try:
        return {"rows": query(job["fixture"], job["query"], job["deadline_s"], job["max_rows"])}
    except (sqlite3.Error, sqlite3.Warning) as e:  # Warning: more than one statement
        return {"error": str(e)}


def query(fixture: str, text: str, deadline_s: float, max_rows: int) -> list[tuple]:
    connection = sqlite3.connect(f"file:{fixture}?mode=ro", uri=True)
    try:
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES)
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        connection.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")
        connection.execute("PRAGMA temp_store = MEMORY")
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(authorize)
        stop_at = time.monotonic() + deadline_s
        connection.set_progress_handler(lambda: int(time.monotonic() > stop_at), 10_000)
        cursor = connection.execute(text)
        rows = cursor.fetchmany(max_rows + 1)
        if len(rows) > max_rows:
            raise sqlite3.OperationalError(f"more than {max_rows} rows")
        return [tuple(normal(v) for v in row) for row in rows]
    finally:
        connection.close()
