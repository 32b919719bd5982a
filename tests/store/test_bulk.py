"""A bulk write's transaction (``store/bulk.py``): foreign keys checked once, for the rows it
added, on a connection that goes back to the pool with its checks on."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from preflab.store import repo
from preflab.store.bulk import ForeignKeyViolation, bulk_transaction
from preflab.store.db import open_db, transaction


def _setup(tmp_path, projects: tuple[str, ...] = ("p",)):
    engine = open_db(f"sqlite:///{tmp_path / 'bulk.db'}")
    with transaction(engine) as session:
        for name in projects:
            repo.create_project(session, name)
    return engine


def _items(conn) -> int:
    return conn.execute(text("SELECT count(*) FROM items")).scalar()


def _item(session, pk: int, project_pk: int) -> None:
    session.execute(
        text(
            "INSERT INTO items (pk, project_pk, item_key, content_hash, prompt, domains, metadata, "
            "created_at) VALUES (:pk, :project, :key, :hash, '\"q\"', '[]', '{}', '2026-01-01')"
        ),
        {"pk": pk, "project": project_pk, "key": f"i{pk}", "hash": f"h{pk}"},
    )


def _fk_on(engine) -> bool:
    with engine.connect() as conn:
        return conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_rows_that_point_nowhere_fail_the_whole_write(tmp_path) -> None:
    engine = _setup(tmp_path)
    with pytest.raises(ForeignKeyViolation, match=r"items\.project_pk point at no projects\.pk"):
        with bulk_transaction(engine) as session:
            _item(session, 1, 1)
            _item(session, 2, 99)  # no project 99: SQLite let it in, the check at the end does not
    with engine.connect() as conn:
        assert _items(conn) == 0  # nothing half-written
    assert _fk_on(engine)  # the pooled connection checks keys again
    engine.dispose()


def test_one_bad_row_among_many_values_is_found(tmp_path) -> None:
    """A column with several values among the added rows is checked row by row."""
    engine = _setup(tmp_path, ("p", "q"))
    with pytest.raises(ForeignKeyViolation, match="1 new row"):
        with bulk_transaction(engine) as session:
            for pk in range(1, 50):
                _item(session, pk, 1 + pk % 2)
            _item(session, 50, 7)
    assert _fk_on(engine)
    engine.dispose()


def test_good_rows_commit_and_old_rows_are_not_rechecked(tmp_path) -> None:
    engine = _setup(tmp_path)
    with engine.connect() as conn:  # a row from before that points nowhere (checks off)
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        conn.execute(
            text(
                "INSERT INTO items (pk, project_pk, item_key, content_hash, prompt, domains, "
                "metadata, created_at) VALUES (1, 42, 'old', 'old', '\"q\"', '[]', '{}', '2026')"
            )
        )
        conn.commit()
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
    with bulk_transaction(engine) as session:
        _item(session, 2, 1)
        _item(session, 3, 1)
    with engine.connect() as conn:
        assert _items(conn) == 3
    assert _fk_on(engine)
    engine.dispose()


def _candidate(session, item_pk: int, key: str = "a") -> None:
    session.execute(
        text(
            "INSERT INTO candidates (item_pk, candidate_key, position, text, source, metadata) "
            "VALUES (:item, :key, 0, 't', 'model', '{}')"
        ),
        {"item": item_pk, "key": key},
    )


def _committed_items(engine, pks) -> None:
    with transaction(engine) as session:
        for pk in pks:
            _item(session, pk, 1)


@pytest.mark.parametrize(
    "then",
    [
        # keys among the added parents (no gap) pass without a lookup; one past them does not
        lambda session: _candidate(session, 6),
        # an added parent deleted again leaves a gap: the range proves nothing, rows are looked up
        lambda session: session.execute(text("DELETE FROM items WHERE pk = 3")),
    ],
    ids=["past-the-last", "gap"],
)
def test_a_key_at_no_added_row_fails(tmp_path, then) -> None:
    engine = _setup(tmp_path)
    with pytest.raises(ForeignKeyViolation, match=r"1 new row\(s\) of candidates\.item_pk"):
        with bulk_transaction(engine) as session:
            for pk in range(1, 6):
                _item(session, pk, 1)
                _candidate(session, pk)
            then(session)
    with engine.connect() as conn:
        assert _items(conn) == 0
    engine.dispose()


def test_keys_at_older_rows_are_looked_up(tmp_path) -> None:
    """Added rows that point at rows from before the write: those are looked up, the others not."""
    engine = _setup(tmp_path)
    _committed_items(engine, range(1, 4))
    with bulk_transaction(engine) as session:  # old item 2 and new item 5: both exist
        for pk in range(4, 7):
            _item(session, pk, 1)
        _candidate(session, 2, "old")
        _candidate(session, 5, "new")
    with pytest.raises(ForeignKeyViolation, match=r"1 new row\(s\) of candidates\.item_pk"):
        with bulk_transaction(engine) as session:
            _item(session, 7, 1)
            _candidate(session, 7)
            session.execute(text("DELETE FROM items WHERE pk = 1"))
            _candidate(session, 1)  # an older row, gone: below the added range
    with engine.connect() as conn:
        assert _items(conn) == 6
        assert conn.execute(text("SELECT count(*) FROM candidates")).scalar() == 2
    engine.dispose()
