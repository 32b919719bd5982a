"""The import floor benchmark (``python benchmarks/bench_import_floor.py``) measures what it says:
its "preflab schema" child writes the very rows the importer writes, and every child runs."""

from __future__ import annotations

import importlib.util
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from preflab.io.importer import import_files
from preflab.store import db as store_db
from preflab.store import repo, transaction

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_import_floor.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_import_floor", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ITEMS = "SELECT item_key, content_hash, prompt, domains, reference, gold, metadata FROM items ORDER BY pk"
CANDIDATES = (
    "SELECT i.item_key, c.candidate_key, c.position, c.text, c.messages, c.model, c.source, c.metadata "
    "FROM candidates c JOIN items i ON i.pk = c.item_pk ORDER BY i.pk, c.position"
)
JUDGMENTS = (
    "SELECT i.item_key, r.rater_key, j.kind, j.body, j.rationale, j.pair_lo, j.pair_hi, j.score, "
    "j.shown_order, j.rubric_key, j.review_pass, j.source, j.telemetry, j.idempotency_key, j.content_hash, "
    "j.excluded, j.supersedes_pk FROM judgments j JOIN items i ON i.pk = j.item_pk "
    "JOIN raters r ON r.pk = j.rater_pk ORDER BY j.pk"
)


def _rows(db: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


def test_preflab_child_writes_what_the_importer_writes(bench, tmp_path):
    data = tmp_path / "rows.jsonl"
    bench.bench_import.generate(data, 600, raters=7)
    floor_db, staged_db, import_db = (
        tmp_path / "floor.db",
        tmp_path / "staged.db",
        tmp_path / "import.db",
    )
    assert bench.child_preflab(data, floor_db)["rows"] == 600
    assert (
        bench.child_preflab_c(data, staged_db)["rows"] == 600
    )  # the same rows by INSERT ... SELECT

    engine = store_db.open_db(f"sqlite:///{import_db}")
    with transaction(engine) as s:
        repo.create_project(s, "bench", kinds=["pairwise"])
    report = import_files(engine, "bench", [data])
    engine.dispose()
    assert report.judgments_added == 600

    for sql in (ITEMS, CANDIDATES, JUDGMENTS):
        imported = _rows(import_db, sql)
        assert len(imported) >= 600
        assert _rows(floor_db, sql) == imported
        assert _rows(staged_db, sql) == imported

    # The minimal layout holds the same items and one judgment each, written either way.
    minimal_db, minimal_c_db = tmp_path / "minimal.db", tmp_path / "minimal_c.db"
    assert bench.child_minimal(data, minimal_db)["rows"] == 600
    assert bench.child_minimal_c(data, minimal_c_db)["rows"] == 600
    keys = "SELECT item_key FROM items ORDER BY pk"
    assert _rows(minimal_db, keys) == _rows(import_db, keys)
    assert _rows(minimal_db, "SELECT count(*) FROM judgments") == [(600,)]
    for table in ("items", "judgments"):
        assert _rows(minimal_c_db, f"SELECT * FROM {table} ORDER BY pk") == _rows(
            minimal_db, f"SELECT * FROM {table} ORDER BY pk"
        )


@pytest.mark.slow
def test_every_child_runs_and_the_bound_is_printed(bench, capsys):
    result = bench.main(["--rows", "3000"])
    assert result["rows"] == 3000
    for kind in bench.CHILDREN:
        assert result[f"{kind}_seconds"] > 0
    out = capsys.readouterr().out
    for line in (
        "lower bound with the stripped layout",
        "lower bound with the minimal layout",
        "lower bound with the preflab layout",
        "lower bound with the minimal layout, SQLite alone",
    ):
        assert line in out
