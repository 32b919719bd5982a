"""Alembic migrations: the upgraded schema is exactly ``Base.metadata``, and it goes back down."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from preflab.store import db
from preflab.store.models import Base


def _diffs(engine):
    with engine.connect() as conn:
        return compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
        )


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


def test_bulk_tables_have_no_server_defaults(db_url):
    """The importer leaves out columns that are NULL in a whole chunk (``_without_null_columns``):
    that stores NULL only because no column of these tables has a default in the database."""
    engine = db.open_db(db_url)
    inspector = inspect(engine)
    defaults = {
        (table, c["name"]): c["default"]
        for table in ("items", "candidates", "judgments", "raters")
        for c in inspector.get_columns(table)
    }
    engine.dispose()
    assert len(defaults) > 40
    assert {k: v for k, v in defaults.items() if v is not None and k[1] != "pk"} == {}


def test_0004_keeps_judgments_and_moves_their_uniqueness_to_the_item(db_url):
    import pytest
    from sqlalchemy.exc import IntegrityError

    engine = db.make_engine(db_url)
    db.upgrade(engine, "0003_pool_open_index")
    now = "2026-11-30 00:00:00"
    judgment = (
        "INSERT INTO judgments (project_pk, item_pk, rater_pk, kind, body, review_pass, source, "
        "content_hash, excluded, created_at, idempotency_key) VALUES (1, {item}, 1, 'pairwise', '{{}}', 0, "
        "'human', '{digest}', false, '{now}', {key})"
    )
    with engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO projects (pk, name, title, secret, kinds, settings, created_at) "
                f"VALUES (1, 'p', '', 's', '[]', '{{}}', '{now}')"
            )
        )
        for pk in (1, 2):
            conn.execute(
                text(
                    f"INSERT INTO items (pk, project_pk, item_key, content_hash, prompt, domains, metadata, "
                    f"created_at) VALUES ({pk}, 1, 'i{pk}', 'h{pk}', '\"q\"', '[]', '{{}}', '{now}')"
                )
            )
        conn.execute(
            text(
                f"INSERT INTO raters (pk, project_pk, rater_key, rater_hash, created_at) "
                f"VALUES (1, 1, 'r', 'h', '{now}')"
            )
        )
        conn.execute(text(judgment.format(item=1, digest="abc", now=now, key="NULL")))
    db.upgrade(engine)
    assert _diffs(engine) == []
    with engine.begin() as conn:
        assert conn.execute(text("SELECT item_pk, content_hash FROM judgments")).all() == [
            (1, "abc")
        ]
        # no idempotency key twice: fine (the partial index holds only keys)
        conn.execute(text(judgment.format(item=2, digest="abc", now=now, key="NULL")))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text(judgment.format(item=1, digest="abc", now=now, key="'k1'")))
    with engine.begin() as conn:
        conn.execute(text(judgment.format(item=1, digest="abd", now=now, key="'k1'")))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text(judgment.format(item=2, digest="abe", now=now, key="'k1'")))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM judgments")).scalar_one() == 3
    engine.dispose()


def test_autogenerate_against_the_models_finds_no_difference(db_url):
    """What ``alembic check`` does: run the shipped env.py in autogenerate mode against the
    upgraded database. A model change without its migration fails here, on both databases."""
    from alembic import command
    from alembic.util.exc import AutogenerateDiffsDetected

    engine = db.make_engine(db_url)
    db.upgrade(engine)
    command.check(db.alembic_config(db_url))  # raises AutogenerateDiffsDetected on any difference
    # and it can fail: a database one index short of the models is reported
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_assignments_item_status"))
    with pytest.raises(AutogenerateDiffsDetected, match="ix_assignments_item_status"):
        command.check(db.alembic_config(db_url))
    engine.dispose()


def test_the_migrations_freeze_the_trigger_ddl_of_their_day():
    """Each migration carries its own copy of the triggers' DDL: 0012 all three, 0017 the
    exclusion trigger it re-creates. The module that ``create_all`` uses must create what the
    migrations leave, or a change to it needs a new migration."""
    import importlib

    from preflab.store import triggers

    m12 = importlib.import_module("preflab.store.migrations.versions.0012_label_count_triggers")
    m17 = importlib.import_module("preflab.store.migrations.versions.0017_ai_labels_not_counted")
    for dialect in ("sqlite", "postgresql"):
        replaced = [s for s in m12.CREATE[dialect] if "judgments_exclusion_count" in s]
        kept = [s for s in m12.CREATE[dialect] if "judgments_exclusion_count" not in s]
        assert len(replaced) == len(m17.CREATE[dialect]), dialect
        assert sorted(kept + list(m17.CREATE[dialect])) == sorted(
            triggers.create_statements(dialect)
        )
        assert list(m12.DROP[dialect]) == triggers.drop_statements(dialect)


def test_0012_recounts_the_pool_and_then_keeps_the_count(db_url):
    """Existing counters are made right once (a suspension used to take a revised label off
    twice; 0017: a judge's label counted), and from then on the triggers keep them: excluding a
    person's label takes it off, a judge's moves nothing."""
    engine = db.make_engine(db_url)
    db.upgrade(engine, "0011_audit_log")
    now = "2026-11-30 00:00:00"
    judgment = (
        "INSERT INTO judgments (pk, project_pk, item_pk, rater_pk, kind, body, review_pass, source, "
        "content_hash, excluded, created_at, batch_pk, supersedes_pk) VALUES ({pk}, 1, 1, 1, "
        "'pairwise', '{{}}', {rp}, 'human', 'h{pk}', {excluded}, '{now}', NULL, {sup})"
    )
    with engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO projects (pk, name, title, secret, kinds, settings, created_at) "
                f"VALUES (1, 'p', '', 's', '[]', '{{}}', '{now}')"
            )
        )
        conn.execute(
            text(
                f"INSERT INTO items (pk, project_pk, item_key, content_hash, prompt, domains, "
                f"metadata, created_at) VALUES (1, 1, 'i1', 'h1', '\"q\"', '[]', '{{}}', '{now}')"
            )
        )
        conn.execute(
            text(
                f"INSERT INTO raters (pk, project_pk, rater_key, rater_hash, created_at) "
                f"VALUES (1, 1, 'r', 'h', '{now}')"
            )
        )
        for pk, rp, excluded, sup in [
            (1, 0, "false", "NULL"),  # counted
            (2, 0, "false", "NULL"),  # counted
            (3, 0, "false", 1),  # a revision of 1: not counted again
            (4, 1, "false", "NULL"),  # a review pass: not counted
            (5, 0, "true", "NULL"),  # excluded: not counted
        ]:
            conn.execute(text(judgment.format(pk=pk, rp=rp, excluded=excluded, sup=sup, now=now)))
        # a model judge's label (0017): never counted, its exclusion moves nothing
        conn.execute(text(judgment.format(pk=6, rp=0, excluded="false", sup="NULL", now=now)))
        conn.execute(text("UPDATE judgments SET source = 'ai' WHERE pk = 6"))
        conn.execute(
            text(
                "INSERT INTO task_pool (project_pk, item_pk, role, target, filled, order_key) "
                "VALUES (1, 1, 'production', 3, 0, 1)"  # drifted: 0 where 2 are counted
            )
        )
    db.upgrade(engine)
    filled = "SELECT filled FROM task_pool WHERE item_pk = 1"
    with engine.begin() as conn:
        assert conn.execute(text(filled)).scalar_one() == 2
        conn.execute(text("UPDATE judgments SET excluded = true WHERE pk = 6"))
        assert conn.execute(text(filled)).scalar_one() == 2
        conn.execute(text("UPDATE judgments SET excluded = true WHERE pk = 2"))
        assert conn.execute(text(filled)).scalar_one() == 1
    engine.dispose()
