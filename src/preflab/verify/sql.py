"""The SQL verifier: a candidate query against a read-only copy of a SQLite fixture.

The query runs in a judge worker process (:mod:`.worker`, :mod:`._sql_judge`), not in the
caller: the copy is opened there ``mode=ro`` with ``PRAGMA query_only``; an authorizer refuses
``ATTACH`` (which could create files) and every statement but ``SELECT``/``WITH``; a progress
handler stops runaway queries at the task's deadline; no string or blob may exceed 16 MiB and
SQLite's heap 256 MiB; the worker's address space is capped at :data:`MEMORY_MB` MiB and it is
killed when one SQLite call (``randomblob``, a ``LIKE`` over a huge string) outlasts the deadline
by :data:`KILL_GRACE_S`. At most ``MAX_ROWS`` rows are read. Result sets are compared as
multisets (order-insensitive) unless the task says ``ordered``; floats compare to 9 decimals.
The fixture's SHA-256 is checked after the run.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path

from ._sql_judge import normal
from .digest import sha256_file
from .result import Verdict
from .tasks import SqlTask
from .worker import JobFailed, JobTimeout, run_job

MAX_ROWS = 100_000
MEMORY_MB = 1024  # the worker's address space (SQLite's heap is capped at 256 MiB inside it)
MAX_REPLY_BYTES = 256 * 1024 * 1024
KILL_GRACE_S = 0.5  # the progress handler stops a query at the deadline; the kill comes after
SQL_FENCE = re.compile(r"```(?:sql|sqlite)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_sql(completion: str) -> str:
    blocks = SQL_FENCE.findall(completion)
    return (blocks[-1] if blocks else completion).strip().rstrip(";").strip()


def run_query(fixture: Path, query: str, *, deadline_s: float) -> list[tuple]:
    """The rows of ``query`` on a read-only connection, run in a judge worker; raises
    ``sqlite3.Error`` on refusal, on failure and past the deadline."""
    job = {"fixture": str(fixture), "query": query, "deadline_s": deadline_s, "max_rows": MAX_ROWS}
    try:
        reply = run_job(
            "sql",
            job,
            timeout_s=deadline_s + KILL_GRACE_S,
            memory_mb=MEMORY_MB,
            max_reply_bytes=MAX_REPLY_BYTES,
        )
    except JobTimeout:
        raise sqlite3.OperationalError(
            f"killed: one SQLite call ran past the {deadline_s:g} s deadline"
        ) from None
    except JobFailed as e:
        raise sqlite3.OperationalError(str(e)) from None
    if "error" in reply:
        raise sqlite3.OperationalError(reply["error"])
    return [tuple(row) for row in reply["rows"]]


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
                expected = [tuple(normal(v) for v in row) for row in task.expected_rows]
            else:  # a task has exactly one of them (SqlTask's validation)
                assert task.reference_query is not None
                expected = run_query(copy, task.reference_query, deadline_s=task.timeout_s)
            actual = run_query(copy, query, deadline_s=task.timeout_s)
            error = None
        except (sqlite3.Error, sqlite3.Warning) as e:  # Warning: more than one statement
            actual, error = None, f"query refused or failed: {e}"
        intact = sha256_file(copy) == copy_digest and sha256_file(fixture) == before
    if not intact:
        reward, reason = 0.0, "fixture digest changed during the run"
    elif actual is None:  # the query failed: ``error`` says how
        reward, reason = 0.0, str(error)
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
