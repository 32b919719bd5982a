"""Alembic migrations: the upgraded schema is exactly ``Base.metadata``, and it goes back down."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from preflab.store import db
from preflab.store.models import Base


def _diffs(engine):
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)


def test_first_revision_id_is_stable():
    # Other branches build on it (``0002_server`` has down_revision "0001_initial").
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(db.alembic_config())
    assert script.get_revision("0001_initial").down_revision is None


def test_upgrade_from_empty_matches_the_models(db_url):
    engine = db.make_engine(db_url)
    assert db.current_revision(engine) is None
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    assert _diffs(engine) == []
    engine.dispose()


def test_downgrade_to_base_removes_every_table(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    db.downgrade(engine, "base")
    assert db.current_revision(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(engine)  # and up again
    assert _diffs(engine) == []
    engine.dispose()


def test_open_db_creates_then_reuses(db_url):
    engine = db.open_db(db_url)
    assert db.current_revision(engine) == db.head_revision()
    engine.dispose()
    engine = db.open_db(db_url)  # second open: nothing to do
    assert db.current_revision(engine) == db.head_revision()
    engine.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(sqlite_url):
    engine = db.open_db(sqlite_url)
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
    engine.dispose()


def test_migrations_ship_inside_the_package():
    assert (db.MIGRATIONS / "env.py").is_file()
    assert (db.MIGRATIONS / "versions" / "0001_initial.py").is_file()
    assert "preflab" in str(db.MIGRATIONS.parent)
