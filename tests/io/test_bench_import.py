"""Smoke test of the import benchmark (the full run: ``python benchmarks/bench_import.py``), and
its floor writes the very rows the importer writes (else the 1.3x target measures nothing)."""

from __future__ import annotations

import importlib.util
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from preflab.io.importer import import_files
from preflab.io.importer import worker as importer_worker
from preflab.store import db as store_db
from preflab.store import repo, transaction

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_import.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_import", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_benchmark_runs_on_20000_rows():
    result = load_bench().main(["--rows", "20000", "--json", "--pg-url", ""])
    assert result["rows"] == 20000
    assert result["import_rows_per_s"] > 0 and result["baseline_rows_per_s"] > 0
    assert result["ratio_to_baseline"] > 0 and result["ratio_to_floor"] > 0
    assert result["import_peak_rss_mb"] < 500


@pytest.mark.slow
@pytest.mark.postgres
def test_benchmark_measures_postgresql_beside_sqlite(pg_url):
    admin = pg_url.rsplit("/", 1)[0] + "/postgres"
    result = load_bench().main(["--rows", "2000", "--json", "--pg-url", admin])
    assert result["pg_import_seconds"] > 0 and result["pg_copy_seconds"] > 0
    assert result["pg_ratio_to_copy"] > 0 and result["pg_ratio_to_sqlite_import"] > 0


@pytest.mark.slow
def test_peak_rss_is_the_imports_own_not_its_parents():
    # A parent larger than the import (a test worker that has loaded torch, here 600 MiB of
    # touched pages): Linux's getrusage reported the parent's peak for the child.
    ballast = bytearray(600 * 2**20)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))
    result = load_bench().main(["--rows", "2000", "--json", "--pg-url", ""])
    assert result["import_peak_rss_mb"] < 400 and result["baseline_peak_rss_mb"] < 400
    del ballast


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


@pytest.mark.parametrize("worker", ["0", "1"], ids=["in-process", "staged-by-worker"])
def test_the_floor_writes_what_the_importer_writes(tmp_path, monkeypatch, worker):
    """Both ways the importer writes: rows bound here, and rows staged by the converting
    process and moved with ``INSERT ... SELECT``."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 100)  # the rest converted by the other process
    bench = load_bench()
    data = tmp_path / "rows.jsonl"
    bench.generate(data, 600, raters=7)
    floor_db, import_db = tmp_path / "floor.db", tmp_path / "import.db"
    assert bench.child_floor(data, floor_db)["rows"] == 600
    engine = store_db.open_db(f"sqlite:///{import_db}")
    with transaction(engine) as s:
        repo.create_project(s, "bench", kinds=["pairwise"])
    assert import_files(engine, "bench", [data]).judgments_added == 600
    engine.dispose()
    for sql in (ITEMS, CANDIDATES, JUDGMENTS):
        imported = _rows(import_db, sql)
        assert len(imported) >= 600
        assert _rows(floor_db, sql) == imported


@pytest.mark.parametrize("worker", ["0", "1"], ids=["in-process", "staged-by-worker"])
def test_the_floor_writes_what_the_importer_writes_for_items_judged_by_several_raters(
    tmp_path, monkeypatch, worker
):
    """``--per-item 3``: each item written once, its three judgments (three raters) with it."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 100)
    bench = load_bench()
    data = tmp_path / "rows.jsonl"
    bench.generate(data, 900, raters=7, per_item=3)
    floor_db, import_db = tmp_path / "floor.db", tmp_path / "import.db"
    assert bench.child_floor(data, floor_db)["rows"] == 900
    engine = store_db.open_db(f"sqlite:///{import_db}")
    with transaction(engine) as s:
        repo.create_project(s, "bench", kinds=["pairwise"])
    report = import_files(engine, "bench", [data])
    engine.dispose()
    assert (report.items_added, report.items_existing, report.judgments_added) == (300, 600, 900)
    for sql in (ITEMS, CANDIDATES, JUDGMENTS):
        assert _rows(floor_db, sql) == _rows(import_db, sql)
    assert len(_rows(import_db, ITEMS)) == 300
