"""The import floor written in chunks: ``python docs/experiments/bench_import_chunked_floor.py
[--rows N]`` (a finished experiment, kept runnable; see docs/benchmarks.md, "Import, staged").

``bench_import.py``'s floor moves the importer's rows with one ``INSERT ... SELECT`` per table
(all items, then all candidates, then all judgments). An import checks each chunk against what
the earlier chunks wrote, so it must write chunk by chunk: items, candidates and judgments of 10k
comparisons, then the next. This runs both orders on the same staged rows, each into a fresh
copy of the same database, and prints SQLite's CPU seconds (moves, commit, close).

``--order`` names the runs: ``whole`` / ``chunked`` with foreign keys checked row by row (the
first measurement), ``*_nofk`` as the import moves since its third pass (foreign keys off,
``INSERT OR ROLLBACK``: no statement journal), and ``deferred_nofk``: items chunk by chunk,
then all candidates and all judgments each in one move (the reordering the third pass named).
Measured 2026-12-01 at 1M, load ~4: whole 7.65 / 7.86 s CPU of moves, chunked 8.63 / 8.46,
deferred 7.54 / 7.86 (commit ~2 s each) — so deferring would win back the ~0.8 s that
chunking costs, but an import would have to keep every chunk's staged rows until the end
(~0.7 KB a comparison) to do it: not built.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_import.py"
CHUNK = 10_000


def _bench():
    spec = importlib.util.spec_from_file_location("bench_import", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _moves(conn: sqlite3.Connection, targets: list[str], rows: int, order: str) -> None:
    # Without foreign-key checks, as the import moves: OR ROLLBACK, so no statement journal.
    insert = "INSERT OR ROLLBACK" if order.endswith("_nofk") else "INSERT"
    if order.startswith("whole"):
        for n, target in enumerate(targets):
            conn.execute(f"{insert} INTO {target} SELECT * FROM stage.t{n}")
        return
    # "deferred": items chunk by chunk, then candidates and judgments each in one move
    tables = 1 if order.startswith("deferred") else 3
    for lo in range(1, rows + 1, CHUNK):
        hi = lo + CHUNK - 1
        # item lo..hi, its two candidates each (rows 2lo-1..2hi), its judgment
        for n, (first, last) in enumerate([(lo, hi), (2 * lo - 1, 2 * hi), (lo, hi)][:tables]):
            conn.execute(
                f"{insert} INTO {targets[n]} SELECT * FROM stage.t{n} WHERE rowid BETWEEN ? AND ?",
                (first, last),
            )
    for n in range(tables, 3):
        conn.execute(f"{insert} INTO {targets[n]} SELECT * FROM stage.t{n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--order", nargs="+", default=["whole", "chunked", "chunked", "whole"])
    args = parser.parse_args()
    bench = _bench()
    from preflab.settings import get_settings
    from preflab.store import db as store_db
    from preflab.store import repo, transaction

    with tempfile.TemporaryDirectory(prefix="preflab-floor-") as tmp:
        data, template = Path(tmp) / "rows.jsonl", Path(tmp) / "template.db"
        bench.generate(data, args.rows)
        engine = store_db.open_db(f"sqlite:///{template}")
        with transaction(engine) as s:
            project = repo.create_project(s, "bench", kinds=["pairwise"])
            project_pk, secret = project.pk, project.secret
        engine.dispose()
        raters, tables = bench._importer_rows(data, project_pk, secret)
        stage = bench._stage(Path(tmp) / "rows.db", list(tables.items()))
        targets = list(tables)
        del tables
        for run, order in enumerate(args.order):
            db = Path(tmp) / f"{run}.db"
            shutil.copy(template, db)
            conn = sqlite3.connect(db, isolation_level=None)
            fk = "OFF" if order.endswith("_nofk") else "ON"  # the import: off, checked after
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"foreign_keys={fk}"):
                conn.execute(f"PRAGMA {pragma}")
            conn.execute(f"PRAGMA cache_size=-{get_settings().import_cache_kib}")
            conn.execute(
                "INSERT INTO import_batches (pk, project_pk, content_hash, sources, format, "
                "counts, created_at) VALUES (1, ?, 'x', '[]', 'comparison', '{}', ?)",
                (project_pk, bench.NOW),
            )
            conn.executemany(
                "INSERT INTO raters (pk, project_pk, rater_key, rater_hash, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                raters,
            )
            conn.execute("ATTACH DATABASE ? AS stage", (str(stage),))
            cpu, start = _cpu(), time.perf_counter()
            conn.execute("BEGIN")
            _moves(conn, targets, args.rows, order)
            moved = _cpu()
            conn.execute("COMMIT")
            committed = _cpu()
            conn.execute("DETACH DATABASE stage")
            conn.close()
            print(
                f"{order:14s} moves {moved - cpu:.2f}s CPU, commit {committed - moved:.2f}s, "
                f"close {_cpu() - committed:.2f}s; wall {time.perf_counter() - start:.1f}s",
                flush=True,
            )
            db.unlink()


if __name__ == "__main__":
    main()
