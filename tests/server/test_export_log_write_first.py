"""An export run by the server records its ``ExportLog`` row in a transaction that writes first.

The server's read engine begins every transaction with a plain ``BEGIN`` (deferred), so a
transaction that reads and then writes holds a WAL snapshot; if another connection commits in
between (an export job's progress, the snapshot's refresh: other processes of the same server),
SQLite refuses the write at once (``SQLITE_BUSY_SNAPSHOT``: "database is locked", no busy wait),
and the in-request export answered 503 with its files already written (CI, stop 41:
``test_authz_matrix``). The log's transaction now starts with its INSERT (the project's pk read
in a transaction before it), which SQLite retries under its busy timeout.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import event

from .conftest import seed


def test_a_write_committed_just_before_the_log_insert_does_not_fail_the_export(
    sqlite_url, tmp_path
):
    from preflab.server.database import Database
    from preflab.server.services import projects

    seeded = seed(sqlite_url, n_items=6)
    db = Database(sqlite_url, pool_size=2, max_overflow=1)
    path = sqlite_url.removeprefix("sqlite:///")
    interleaved: list[str] = []

    def other_writer(conn, cursor, statement, parameters, context, executemany):
        # another process commits a write right before the export's log row is inserted
        if statement.lstrip().upper().startswith("INSERT INTO EXPORT_LOG") and not interleaved:
            other = sqlite3.connect(path, timeout=30)
            other.execute("UPDATE projects SET name = name")
            other.commit()
            other.close()
            interleaved.append(statement)

    event.listen(db.engine, "before_cursor_execute", other_writer)
    try:
        log_pk, manifest = projects.export_project(
            db, seeded.project, "raw", tmp_path / "out", force=True
        )
    finally:
        event.remove(db.engine, "before_cursor_execute", other_writer)
        db.dispose()
    assert interleaved, "the export wrote no ExportLog row through the read engine"
    assert log_pk is not None
    assert manifest["format"] == "raw"
    assert (tmp_path / "out" / "manifest.json").exists()
