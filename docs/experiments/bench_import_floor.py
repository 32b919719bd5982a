"""What the import target allows, measured: ``python docs/experiments/bench_import_floor.py [--rows N]``.

A finished experiment (2026-11-30), kept runnable; its narrative and figures are in
``docs/benchmarks.md``. The figure the import is held to (SQLite alone writing preflab's rows)
is measured by ``benchmarks/bench_import.py`` itself in every run.

The foundation issue asks for >= 50,000 rows/s and <= 3x the baseline (``orjson`` parse +
``executemany`` into a bare table) when importing 1,000,000 comparison rows into SQLite on this
2-core machine. This benchmark measures, in one run on the same generated file as
``bench_import.py``, the parts an import cannot do without, each in its own fresh child process:

- **baseline** — exactly ``bench_import.py``'s baseline (parse + write), the 1x of the ratio;
- **write: bare table** — the baseline's rows, already built in memory, written only;
- **write: + content key** — the same table plus the one index an idempotent import cannot skip:
  a unique, content-derived item key (re-importing a row must find it);
- **write: minimal layout** — the smallest layout that still holds what preflab promises: one
  item row (prompt, both candidates inline as JSON, its content hash) and one judgment row
  (foreign keys to item and rater, content hash unique per item, index by rater) — two rows and
  three index entries a comparison, against preflab's four rows and seven; and the same
  **stripped** of foreign-key enforcement and of the index by rater;
- **write: preflab schema** — the real schema (``open_db``), rows exactly as the importer writes
  them;
- **convert** — reading the file, ``orjson`` and the importer's ``comparison_pair`` (its checks and
  the five SHA-256 the wire format defines: two candidate ids, item id, item and judgment content
  hashes), no database: the Python work of one comparison.

Every write child builds its rows before the clock starts and times ``BEGIN``, ``executemany`` in
chunks of 5,000, ``COMMIT`` and ``close`` (which checkpoints the WAL into the database file, as the
baseline's ``close`` does), with the importer's pragmas (WAL, ``synchronous=NORMAL``, foreign
keys on, 192 MiB page cache). Holding the rows costs memory: this is an experiment, not an import.

Two more children take Python out of the writer: **SQLite alone** puts the rows of the minimal
layout / of preflab's schema into an unjournaled staging file first (timed apart: Python's
per-row binding, work the converting process could do), then moves them with one
``INSERT ... SELECT`` per table — SQLite's B-trees, foreign-key checks, commit and checkpoint only.

The last lines print the bounds: an import runs its writes on one core (SQLite has one writer),
and at best overlaps all of its other work on the second, so its wall time is at least
``max(write, (write + convert) / 2)``, or with the binding moved out of the writer
``max(C write, (C write + staging + convert) / 2)``. Prints one JSON line of results last.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SRC = ROOT / "src"

# benchmarks/bench_import.py: its generator and baseline, so both benchmarks measure the same.
_spec = importlib.util.spec_from_file_location(
    "bench_import", ROOT / "benchmarks" / "bench_import.py"
)
bench_import = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_import)  # type: ignore[union-attr]

CHUNK = 5000
CACHE_KIB = 192 * 1024  # the importer's page cache (PREFLAB_IMPORT_CACHE_KIB's default)


def _connect(db: Path):
    import sqlite3

    conn = sqlite3.connect(db, isolation_level=None)
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "foreign_keys=ON",
        f"cache_size=-{CACHE_KIB}",
    ):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def _timed_write(conn, statements: list[tuple[str, list[tuple]]]) -> float:
    """Seconds to write every statement's rows in one transaction, chunk by chunk and table by
    table in turn (as the importer does), then commit and close."""
    start = time.perf_counter()
    conn.execute("BEGIN")
    total = len(statements[0][1])
    per_item = [len(rows) // total for _, rows in statements]  # e.g. two candidates an item
    for i in range(0, total, CHUNK):
        for (sql, rows), k in zip(statements, per_item, strict=True):
            conn.executemany(sql, rows[i * k : (i + CHUNK) * k])
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - start


def _timed_staged_write(conn, db: Path, statements: list[tuple[str, list[tuple]]]) -> dict:
    """SQLite's own work, without Python's per-row binding in the writer: the rows go first into an
    unjournaled staging file (timed apart as ``stage_seconds``: work a second process could do),
    then one ``INSERT ... SELECT`` per table moves them inside SQLite, committed and closed as in
    :func:`_timed_write` (``seconds``)."""
    import sqlite3

    stage_path = db.with_name(db.stem + "-stage.db")
    stage = sqlite3.connect(stage_path, isolation_level=None)
    stage.execute("PRAGMA journal_mode=OFF")
    stage.execute("PRAGMA synchronous=OFF")
    start = time.perf_counter()
    stage.execute("BEGIN")
    for n, (_, rows) in enumerate(statements):
        width = len(rows[0])
        stage.execute(f"CREATE TABLE t{n} ({', '.join(f'c{i}' for i in range(width))})")
        stage.executemany(f"INSERT INTO t{n} VALUES ({', '.join('?' * width)})", rows)
    stage.execute("COMMIT")
    stage.close()
    stage_seconds = time.perf_counter() - start
    conn.execute("ATTACH DATABASE ? AS stage", (str(stage_path),))
    start = time.perf_counter()
    conn.execute("BEGIN")
    for n, (sql, _) in enumerate(statements):  # a plain table scans in rowid order: the rows' order
        conn.execute(sql.split(" VALUES ")[0] + f" SELECT * FROM stage.t{n}")
    conn.execute("COMMIT")
    seconds = time.perf_counter() - start
    conn.execute("DETACH DATABASE stage")
    start = time.perf_counter()
    conn.close()
    return {"seconds": seconds + time.perf_counter() - start, "stage_seconds": stage_seconds}


def _write(conn, db: Path, statements: list[tuple[str, list[tuple]]], staged: bool) -> dict:
    rows = len(statements[0][1])
    if staged:
        return {"rows": rows, **_timed_staged_write(conn, db, statements)}
    return {"rows": rows, "seconds": _timed_write(conn, statements)}


def _pairs(data: Path):
    """Each record with its rows, as the importer converts it (its own ``comparison_pair``)."""
    from preflab.io.formats.generic import comparison_pair
    from preflab.io.importer import ImportOptions
    from preflab.io.importer.convert import convert_options

    options = convert_options(ImportOptions())
    with open(data, "rb") as f:
        for line in f:
            r = orjson.loads(line)
            yield r, comparison_pair(r, options)


def child_bare(data: Path, db: Path) -> dict:
    rows = []
    with open(data, "rb") as f:
        for line in f:
            r = orjson.loads(line)
            rows.append((r["prompt"], r["chosen"], r["rejected"], r["labeler"]))
    conn = _connect(db)
    conn.execute("CREATE TABLE comparisons (prompt TEXT, chosen TEXT, rejected TEXT, labeler TEXT)")
    return {
        "rows": len(rows),
        "seconds": _timed_write(conn, [("INSERT INTO comparisons VALUES (?, ?, ?, ?)", rows)]),
    }


def child_keyed(data: Path, db: Path) -> dict:
    rows = [
        (p.item_key, r["prompt"], r["chosen"], r["rejected"], r["labeler"]) for r, p in _pairs(data)
    ]
    conn = _connect(db)
    conn.execute(
        "CREATE TABLE comparisons (item_key TEXT NOT NULL UNIQUE, prompt TEXT, chosen TEXT, rejected TEXT, "
        "labeler TEXT)"
    )
    return {
        "rows": len(rows),
        "seconds": _timed_write(conn, [("INSERT INTO comparisons VALUES (?, ?, ?, ?, ?)", rows)]),
    }


MINIMAL_SCHEMA = """
CREATE TABLE projects (pk INTEGER PRIMARY KEY);
CREATE TABLE raters (pk INTEGER PRIMARY KEY, project_pk INTEGER NOT NULL REFERENCES projects(pk),
                     rater_key TEXT NOT NULL, UNIQUE (project_pk, rater_key));
CREATE TABLE items (pk INTEGER PRIMARY KEY, project_pk INTEGER NOT NULL REFERENCES projects(pk),
                    item_key TEXT NOT NULL, content_hash BLOB NOT NULL, prompt TEXT NOT NULL,
                    candidates TEXT NOT NULL, UNIQUE (project_pk, item_key));
CREATE TABLE judgments (pk INTEGER PRIMARY KEY, item_pk INTEGER NOT NULL REFERENCES items(pk),
                        rater_pk INTEGER NOT NULL REFERENCES raters(pk), winner TEXT NOT NULL,
                        strength INTEGER, source TEXT NOT NULL, content_hash BLOB NOT NULL,
                        UNIQUE (item_pk, content_hash));
CREATE INDEX ix_judgments_rater ON judgments (rater_pk);
"""


def child_minimal(data: Path, db: Path, stripped: bool = False, staged: bool = False) -> dict:
    """``stripped``: without foreign-key enforcement and without the index by rater (what the
    server's per-rater queries and the agreement statistics read by); ``staged``: see
    :func:`_timed_staged_write`."""
    raters: dict[str, int] = {}
    items, judgments = [], []
    for pk, (_, p) in enumerate(_pairs(data), 1):
        (c0, c1), (t0, t1) = p.candidate_keys, p.texts
        items.append(
            (
                pk,
                1,
                p.item_key,
                bytes.fromhex(p.item_hash),
                p.prompt,
                orjson.dumps([[c0, t0], [c1, t1]]).decode(),
            )
        )
        judgments.append(
            (
                pk,
                raters.setdefault(p.rater_key, len(raters) + 1),
                p.winner,
                p.strength,
                p.source,
                bytes.fromhex(p.content_hash),
            )
        )
    conn = _connect(db)
    schema = MINIMAL_SCHEMA
    if stripped:
        conn.execute("PRAGMA foreign_keys=OFF")
        schema = schema.replace("CREATE INDEX ix_judgments_rater ON judgments (rater_pk);", "")
    conn.executescript(schema)
    conn.execute("INSERT INTO projects VALUES (1)")
    conn.executemany(
        "INSERT INTO raters VALUES (?, 1, ?)", [(pk, key) for key, pk in raters.items()]
    )
    return _write(
        conn,
        db,
        [
            ("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)", items),
            (
                "INSERT INTO judgments (item_pk, rater_pk, winner, strength, source, content_hash) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                judgments,
            ),
        ],
        staged,
    )


def child_stripped(data: Path, db: Path) -> dict:
    return child_minimal(data, db, stripped=True)


def child_minimal_c(data: Path, db: Path) -> dict:
    return child_minimal(data, db, staged=True)


def child_preflab_c(data: Path, db: Path) -> dict:
    return child_preflab(data, db, staged=True)


def child_preflab(data: Path, db: Path, staged: bool = False) -> dict:
    """The rows :meth:`preflab.io.importer.loader.Loader._write` builds for these records (the
    all-NULL columns left out, as the importer does), into a database made by ``open_db``;
    ``staged``: see :func:`_timed_staged_write`."""
    from preflab.schema import rater_hash
    from preflab.store import db as store_db
    from preflab.store import repo, transaction

    engine = store_db.open_db(f"sqlite:///{db}")
    with transaction(engine) as s:
        project = repo.create_project(s, "bench", kinds=["pairwise"])
        project_pk, secret = project.pk, project.secret
    engine.dispose()
    now = "2026-11-30 00:00:00.000000"
    raters: dict[str, int] = {}
    items, candidates, judgments = [], [], []
    for pk, (_, p) in enumerate(_pairs(data), 1):
        (c0, c1), (t0, t1) = p.candidate_keys, p.texts
        items.append((pk, project_pk, p.item_key, p.item_hash, p.prompt_json, "[]", "{}", 1, now))
        candidates.append((pk, c0, 0, t0, "model", "{}"))
        candidates.append((pk, c1, 1, t1, "model", "{}"))
        rater = raters.setdefault(p.rater_key, len(raters) + 1)
        judgments.append(
            (
                project_pk,
                pk,
                rater,
                "pairwise",
                p.body_json,
                p.pair_lo,
                p.pair_hi,
                p.score,
                p.shown_order_json,
                0,
                p.source,
                p.content_hash,
                1,
                0,
                now,
            )
        )
    conn = _connect(db)
    conn.execute(
        "INSERT INTO import_batches (pk, project_pk, content_hash, sources, format, counts, created_at) "
        "VALUES (1, ?, 'x', '[]', 'comparison', '{}', ?)",
        (project_pk, now),
    )
    conn.executemany(
        "INSERT INTO raters (pk, project_pk, rater_key, rater_hash, created_at) VALUES (?, ?, ?, ?, ?)",
        [(pk, project_pk, key, rater_hash(key, secret), now) for key, pk in raters.items()],
    )
    return _write(
        conn,
        db,
        [
            (
                "INSERT INTO items (pk, project_pk, item_key, content_hash, prompt, domains, metadata, batch_pk, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                items,
            ),
            (
                "INSERT INTO candidates (item_pk, candidate_key, position, text, source, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                candidates,
            ),
            (
                "INSERT INTO judgments (project_pk, item_pk, rater_pk, kind, body, pair_lo, pair_hi, score, shown_order, "
                "review_pass, source, content_hash, batch_pk, excluded, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                judgments,
            ),
        ],
        staged,
    )


def child_convert(data: Path, db: Path) -> dict:
    next(_pairs(data))  # the imports, before the clock starts
    start = time.perf_counter()
    n = sum(1 for _ in _pairs(data))
    return {"rows": n, "seconds": time.perf_counter() - start}


CHILDREN = {
    "baseline": ("baseline: parse + write, bare table", bench_import.child_baseline),
    "bare": ("write: bare table", child_bare),
    "keyed": ("write: + unique content key", child_keyed),
    "minimal": ("write: minimal layout (2 rows)", child_minimal),
    "stripped": ("write: minimal, no FK checks, no rater ix", child_stripped),
    "preflab": ("write: preflab schema (4 rows)", child_preflab),
    "minimal_c": ("SQLite alone: minimal layout", child_minimal_c),
    "preflab_c": ("SQLite alone: preflab schema", child_preflab_c),
    "convert": ("convert: read + parse + 5 SHA-256", child_convert),
}


def run_child(kind: str, data: Path, db: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--data", str(data), "--db", str(db)],
        stdout=subprocess.PIPE,
        env=env,
        check=True,
    ).stdout
    return json.loads(out.decode().strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--rate", type=float, default=50_000, help="the target, rows/s (default 50,000)"
    )
    parser.add_argument(
        "--ratio", type=float, default=3.0, help="the target, times the baseline (default 3)"
    )
    parser.add_argument("--child", choices=list(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        result = CHILDREN[args.child][1](args.data, args.db)
        print(json.dumps(result))
        return result

    with tempfile.TemporaryDirectory(prefix="preflab-floor-") as tmp:
        data = Path(tmp) / "comparisons.jsonl"
        bench_import.generate(data, args.rows)
        print(f"{args.rows:,} comparison rows ({data.stat().st_size / 2**20:.0f} MiB)")
        seconds: dict[str, float] = {}
        for kind, (label, _) in CHILDREN.items():
            result = run_child(kind, data, Path(tmp) / f"{kind}.db")
            assert result["rows"] == args.rows, (kind, result)
            seconds[kind] = result["seconds"]
            ratio = seconds[kind] / seconds["baseline"]
            staged = ""
            if "stage_seconds" in result:
                seconds[f"{kind}_stage"] = result["stage_seconds"]
                staged = f"  (+ {result['stage_seconds']:.1f} s staging the rows)"
            print(
                f"  {label:<40} {seconds[kind]:6.1f} s  {args.rows / seconds[kind]:>9,.0f} rows/s  "
                f"{ratio:5.2f}x the baseline{staged}",
                flush=True,
            )
        budget = min(args.rows / args.rate, args.ratio * seconds["baseline"])
        print(
            f"target: at most {budget:.1f} s (>= {args.rate:,.0f} rows/s and <= {args.ratio:g}x the baseline's "
            f"{seconds['baseline']:.1f} s)"
        )
        for kind in ("stripped", "minimal", "preflab"):
            bound = max(seconds[kind], (seconds[kind] + seconds["convert"]) / 2)
            verdict = "within" if bound <= budget else "over"
            print(
                f"lower bound with the {kind} layout: {bound:.1f} s = max(write, (write + convert) / 2), "
                f"{bound / budget:.2f}x the budget: {verdict} the target before any checking, IPC or pk lookups"
            )
        for kind in ("minimal", "preflab"):
            # The binding moved to the converting side: the writer only runs SQLite, the other
            # core parses, hashes and stages.
            c, stage = seconds[f"{kind}_c"], seconds[f"{kind}_c_stage"]
            bound = max(c, (c + stage + seconds["convert"]) / 2)
            verdict = "within" if bound <= budget else "over"
            print(
                f"lower bound with the {kind} layout, SQLite alone in the writer: {bound:.1f} s = max(C write, "
                f"(C write + staging + convert) / 2), {bound / budget:.2f}x the budget: {verdict} the target"
            )
        result = {
            "rows": args.rows,
            "budget_seconds": round(budget, 2),
            **{f"{k}_seconds": round(v, 2) for k, v in seconds.items()},
        }
        print(json.dumps(result))
        return result


if __name__ == "__main__":
    main()
