"""The SQL verifier: a candidate query against a read-only copy of a SQLite fixture.

The copy is opened ``mode=ro`` with ``PRAGMA query_only``; an authorizer refuses ``ATTACH``
(which could create files) and every statement but ``SELECT``/``WITH``; a progress handler
stops runaway queries at the task's deadline; at most ``MAX_ROWS`` rows are read. Result sets
are compared as multisets (order-insensitive) unless the task says ``ordered``; floats compare
to 9 decimals. The fixture's SHA-256 is checked after the run.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path

from .digest import sha256_file
from .result import Verdict
from .tasks import SqlTask

MAX_ROWS = 100_000
SQL_FENCE = re.compile(r"```(?:sql|sqlite)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}


def extract_sql(completion: str) -> str:
    blocks = SQL_FENCE.findall(completion)
    return (blocks[-1] if blocks else completion).strip().rstrip(";").strip()


def _authorize(action, arg1, arg2, db_name, trigger):
    return sqlite3.SQLITE_OK if action in ALLOWED else sqlite3.SQLITE_DENY


def _normal(value):
    return round(value, 9) if isinstance(value, float) else value


def run_query(fixture: Path, query: str, *, deadline_s: float) -> list[tuple]:
    """The rows of ``query`` on a read-only connection; raises ``sqlite3.Error`` on refusal."""
    connection = sqlite3.connect(f"file:{fixture}?mode=ro", uri=True, check_same_thread=False)
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(_authorize)
        stop_at = time.monotonic() + deadline_s
        connection.set_progress_handler(lambda: int(time.monotonic() > stop_at), 10_000)
        cursor = connection.execute(query)
        rows = cursor.fetchmany(MAX_ROWS + 1)
        if len(rows) > MAX_ROWS:
            raise sqlite3.OperationalError(f"more than {MAX_ROWS} rows")
        return [tuple(_normal(v) for v in row) for row in rows]
    finally:
        connection.close()


def same_result(expected: list[tuple], actual: list[tuple], *, ordered: bool) -> bool:
    if ordered:
        return expected == actual
    return Counter(expected) == Counter(actual)


def verify_sql(task: SqlTask, completion: str) -> Verdict:
    started = time.monotonic()
    fixture = Path(task.fixture)
    before = sha256_file(fixture)
    query = extract_sql(completion)
    with tempfile.TemporaryDirectory(prefix="preflab-sql-") as tmp:
        copy = Path(tmp) / fixture.name
        shutil.copyfile(fixture, copy)
        copy.chmod(0o444)
        copy_digest = sha256_file(copy)
        try:
            if task.expected_rows is not None:
                expected = [tuple(_normal(v) for v in row) for row in task.expected_rows]
            else:
                expected = run_query(copy, task.reference_query, deadline_s=task.timeout_s)
            actual = run_query(copy, query, deadline_s=task.timeout_s)
            error = None
        except (sqlite3.Error, sqlite3.Warning) as e:  # Warning: more than one statement
            actual, error = None, f"query refused or failed: {e}"
        intact = sha256_file(copy) == copy_digest and sha256_file(fixture) == before
    if not intact:
        reward, reason = 0.0, "fixture digest changed during the run"
    elif error:
        reward, reason = 0.0, error
    elif same_result(expected, actual, ordered=task.ordered):
        reward, reason = 1.0, f"{len(actual)} rows match"
    else:
        reward, reason = 0.0, f"result differs: {len(actual)} rows, expected {len(expected)}"
    return Verdict(
        task_id=task.task_id,
        kind="sql",
        reward=reward,
        reason=reason,
        harness_sha256_verified=intact,
        wall_s=time.monotonic() - started,
    )
