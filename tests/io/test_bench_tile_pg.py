"""The scale benchmark's copy into PostgreSQL (``benchmarks/bench_tile_pg.py``, issue 27): a tiled
SQLite project copied into PostgreSQL equals, table by table, what ``preflab import`` makes of the
tiled files on PostgreSQL, with the same indexes and constraints and sequences past every pk."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.conftest import pg_admin_url
from tests.io.test_bench_tile import VOLATILE, load


def _dump(rec: dict[str, Any]) -> bytes:
    return orjson.dumps(rec, option=orjson.OPT_SORT_KEYS, default=str)


def normalised_pg(url: str) -> dict[str, list[bytes]]:
    """Every table's rows as :func:`tests.io.test_bench_tile.normalised` has them, on PostgreSQL."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as con:
        items = dict(con.execute("SELECT pk, item_key FROM items").fetchall())
        raters = dict(con.execute("SELECT pk, rater_key FROM raters").fetchall())
        judgments = dict(con.execute("SELECT pk, content_hash FROM judgments").fetchall())
        candidates = {
            pk: f"{items[item_pk]}/{key}"
            for pk, item_pk, key in con.execute("SELECT pk, item_pk, candidate_key FROM candidates")
        }
        refs = {
            "item_pk": items,
            "rater_pk": raters,
            "supersedes_pk": judgments,
            "candidate_pk": candidates,  # a candidate's stored text statistics
        }
        tables = [
            r[0]
            for r in con.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        out = {}
        cur = con.cursor(row_factory=dict_row)
        for table in tables:
            rows = []
            has_pk = "pk" in {
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                    (table,),
                )
            }
            for row in cur.execute(f'SELECT * FROM "{table}"' + (" ORDER BY pk" if has_pk else "")):
                rec = {
                    k: refs[k].get(v) if k in refs and v is not None else v
                    for k, v in row.items()
                    if k not in VOLATILE and f"{k}@{table}" not in VOLATILE
                }
                if table == "audit_events" and isinstance(rec.get("details"), dict):
                    rec["details"].pop("files", None)
                rows.append(_dump(rec))
            out[table] = rows if table == "audit_events" else sorted(rows)
        return out


def schema_pg(url: str) -> dict[str, Any]:
    """The indexes (with their definitions), constraints and triggers of every table."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as con:
        return {
            "indexes": sorted(
                con.execute(
                    "SELECT tablename, indexname, indexdef FROM pg_indexes "
                    "WHERE schemaname = 'public'"
                ).fetchall()
            ),
            "constraints": sorted(
                con.execute(
                    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
                    "FROM pg_constraint WHERE connamespace = 'public'::regnamespace"
                ).fetchall()
            ),
            "triggers": sorted(
                con.execute(
                    "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger "
                    "WHERE NOT tgisinternal"
                ).fetchall()
            ),
        }


@pytest.fixture
def pg_url2(pg_url: str) -> Iterator[str]:
    """A second fresh PostgreSQL database (``pg_url`` made sure there is a server)."""
    from sqlalchemy import create_engine, text

    admin = pg_admin_url()
    assert admin
    name = f"preflab_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield f"{admin.rsplit('/', 1)[0]}/{name}"
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.mark.slow
@pytest.mark.postgres
def test_a_tiled_project_copied_into_postgresql_equals_the_import_of_the_tiled_files(
    tmp_path: Path, pg_url: str, pg_url2: str
) -> None:
    bench, tile, pgcopy = load("bench_scale"), load("bench_tile"), load("bench_tile_pg")
    env = bench._env()
    files = bench.generate(tmp_path / "data", 1200, seed=7, raters=20, per_item=3, batches=2)
    source = tmp_path / "source.db"
    assert bench.step_import(f"sqlite:///{source}", files, 300, env)["status"] == "ok"
    k = 2
    tiled_files = []
    for f in files:
        records = [orjson.loads(line) for line in f.read_bytes().splitlines()]
        out = tmp_path / "tiled" / f.name
        out.parent.mkdir(exist_ok=True)
        out.write_bytes(
            b"".join(
                orjson.dumps(r) + b"\n" for t in range(k) for r in tile.tile_records(records, t)
            )
        )
        tiled_files.append(out)
    reference = pg_url
    assert bench.step_import(reference, tiled_files, 300, env)["status"] == "ok"

    built = tmp_path / "tiled.db"
    tile.tile_database(source, built, k, say=lambda _: None)
    counts = pgcopy.copy_database(built, pg_url2, say=lambda _: None)
    assert counts["rows"]["judgments"] == 2 * 1200

    want, got = normalised_pg(reference), normalised_pg(pg_url2)
    assert want.keys() == got.keys()
    assert len(want["judgments"]) == 2 * 1200 and len(want["items"]) > 0
    for table in want:
        assert got[table] == want[table], table
    assert schema_pg(pg_url2) == schema_pg(reference)

    # the next row of each table gets a pk past the copied ones
    import psycopg

    with psycopg.connect(pg_url2.replace("postgresql+psycopg://", "postgresql://")) as con:
        for table in ("items", "candidates", "judgments", "raters", "import_batches"):
            seq = con.execute("SELECT pg_get_serial_sequence(%s, 'pk')", (table,)).fetchone()[0]
            top = con.execute(f"SELECT max(pk) FROM {table}").fetchone()[0]
            assert con.execute("SELECT nextval(%s)", (seq,)).fetchone()[0] == top + 1, table
        # vacuumed: every page of the judgments all-visible (index-only scans are planned)
        pages, visible = con.execute(
            "SELECT relpages, relallvisible FROM pg_class WHERE relname = 'judgments'"
        ).fetchone()
        assert visible == pages > 0
        # a copy into a database that holds judgments is refused
    with pytest.raises(SystemExit, match="holds judgments"):
        pgcopy.copy_database(built, pg_url2, say=lambda _: None, init=False)
