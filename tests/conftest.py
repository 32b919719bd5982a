"""Shared fixtures. Databases: every store test runs on SQLite and on PostgreSQL.

PostgreSQL comes from ``PREFLAB_TEST_PG_URL`` (``make test`` starts a throwaway cluster through
``scripts/with-postgres.sh``). Without it the PostgreSQL cases skip on a laptop but *fail* in CI
(``CI`` set), so a missing server can never pass silently.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Real data: small excerpts of public sets live in tests/data (LICENSE-DATA there; cut by
# scripts/cut-test-data.py). Nothing outside the checkout is read, so a fresh clone runs it all.
FIXTURES = Path(__file__).resolve().parent / "data"


def _require_or_skip(what: str, how: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI but missing: {how}")
    pytest.skip(f"{what} not available ({how})")


def pg_admin_url() -> str | None:
    return os.environ.get("PREFLAB_TEST_PG_URL")


@pytest.fixture
def pg_url() -> str:
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    admin = pg_admin_url()
    if not admin:
        _require_or_skip("PostgreSQL", "set PREFLAB_TEST_PG_URL or run `make test`")
    from sqlalchemy import create_engine, text

    name = f"preflab_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base = admin.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'preflab.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """Every test using this runs twice: on a SQLite file and on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")
